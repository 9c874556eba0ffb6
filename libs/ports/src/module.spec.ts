import { findingDelayHook, observeFindingDelays, type ServiceContext } from './module';

describe('observeFindingDelays', () => {
  it('observes raised findings only, in seconds from their receipt, by kind and action', () => {
    const seen: [Record<string, unknown>, number][] = [];
    const h = { observe: (labels: Record<string, unknown>, v: number) => seen.push([labels, v]) };
    observeFindingDelays(h, [
      { status: 'raised', kind: 'rule', action: 'flag', received_ms: 1_000 },
      { status: 'updated', kind: 'rule', action: 'flag', received_ms: 1_000 },
      { status: 'resolved', kind: 'question', action: 'flag', received_ms: 1_000 },
      { status: 'raised', kind: 'question', action: 'halt' },
      { status: 'raised', kind: 'question', action: 'halt', received_ms: 2_000 },
      // a clock behind ingest's (another host): no negative delay
      { status: 'raised', kind: 'rule', action: 'halt', received_ms: 9_000 },
    ], 3_500);
    expect(seen).toEqual([
      [{ kind: 'rule', action: 'flag' }, 2.5],
      [{ kind: 'question', action: 'halt' }, 1.5],
      [{ kind: 'rule', action: 'halt' }, 0],
    ]);
  });
});

describe('findingDelayHook', () => {
  it('observes through the process metrics, and not at all in replay (a recording\'s clock)', () => {
    const seen: number[] = [];
    const metrics = { findingDelay: { observe: (_l: unknown, v: number) => void seen.push(v) } } as unknown as ServiceContext['metrics'];
    const live = findingDelayHook({ metrics, platform: {} as ServiceContext['platform'] });
    live!([{ status: 'raised', kind: 'rule', action: 'halt', received_ms: Date.now() - 2_000 }]);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeGreaterThanOrEqual(2);
    expect(findingDelayHook({ metrics, platform: { clock: {} } as unknown as ServiceContext['platform'] })).toBeUndefined();
  });
});
