import { spanEnv, startEnv, T0 } from './fixtures.test';
import { envelopeStatements } from './runs.repo';

/**
 * The statements a batch makes, read without a database: which rows, in which order (the spans'
 * order is their arrival numbers; the runs' is the order their locks are taken in).
 */
function spanRows(envs: Parameters<typeof envelopeStatements>[0]) {
  const sts = envelopeStatements(envs);
  const spans = sts.find((s) => s.sql.includes('INSERT INTO spans'))!;
  const recount = sts.find((s) => s.when === 'rows')!;
  const runs = sts.find((s) => s.sql.includes('INSERT INTO runs'))!;
  return {
    records: JSON.parse(spans.params![0] as string) as Record<string, unknown>[],
    count: spans.params![1],
    payloads: (spans.params![2] as string).split('\n').map((l) => JSON.parse(l) as { span_id: string; status: string }),
    recount: JSON.parse(recount.params![0] as string) as unknown,
    // project and run_id of each run row (10 parameters a row)
    runs: runs.params!.filter((_, i) => i % 10 < 2),
  };
}

describe('envelopeStatements', () => {
  it('takes a span sent twice in one batch once: the later copy, in the first copy\'s place', () => {
    const rows = spanRows([
      spanEnv('p1', { run_id: 'r1', span_id: 'a', start_ms: T0 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'b', start_ms: T0 + 1 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'a', start_ms: T0, status: 'error' }, T0 + 5),
      spanEnv('p1', { run_id: 'r2', span_id: 'a', start_ms: T0 + 2 }),
    ]);
    expect(rows.count).toBe(3);
    expect(rows.payloads.map((s) => [s.span_id, s.status])).toEqual([['a', 'error'], ['b', 'ok'], ['a', 'ok']]);
    expect(rows.records.map((r) => [r.r, r.s, r.e, r.m])).toEqual([['r1', 'a', true, T0 + 5], ['r1', 'b', false, T0], ['r2', 'a', false, T0]]);
  });

  it('writes a tool span\'s tool and parent, and only a tool span\'s, with NUL replaced in the ids', () => {
    const rows = spanRows([
      spanEnv('p\u0000', { run_id: 'r\u0000', span_id: 's\u0000', tool: 'search', parent_id: 'x\u0000', start_ms: T0 }),
      spanEnv('p\u0000', { run_id: 'r\u0000', span_id: 'l', type: 'llm', name: 'chat', usage: { total_tokens: 4 } }),
    ]);
    expect(rows.records).toEqual([
      { p: 'p\uFFFD', r: 'r\uFFFD', s: 's\uFFFD', t: T0, e: false, k: 0, m: T0, c: 'search', q: 'x\uFFFD' },
      { p: 'p\uFFFD', r: 'r\uFFFD', s: 'l', t: null, e: false, k: 4, m: T0 },
    ]);
    expect(rows.recount).toEqual([{ p: 'p\uFFFD', r: 'r\uFFFD' }]);
  });

  it('upserts the runs in key order, and recounts each run of the spans once, in the order they came', () => {
    const rows = spanRows([
      spanEnv('p2', { run_id: 'z', span_id: 's1' }),
      startEnv('p1', { run_id: 'y', ts_ms: T0 }),
      spanEnv('p1', { run_id: 'x', span_id: 's1' }),
      spanEnv('p2', { run_id: 'z', span_id: 's2' }),
      spanEnv('p1', { run_id: 'y', span_id: 's1' }),
    ]);
    expect(rows.runs).toEqual(['p1', 'x', 'p1', 'y', 'p2', 'z']);
    expect(rows.recount).toEqual([{ p: 'p2', r: 'z' }, { p: 'p1', r: 'x' }, { p: 'p1', r: 'y' }]);
  });
});
