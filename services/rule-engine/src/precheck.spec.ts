import { compileRuleSet, parseCheck, RuleEngine, windowKey, type RunWindow } from '@neatroots/checks';
import { MemoryWindowStore, until } from '@neatroots/platform';
import type { Envelope, Span } from '@neatroots/spans';
import { haltingTools, PrecheckCancelledError, Prechecker, PrecheckTimeoutError } from './precheck';

/** The pre-call check against the live engine's own windows and rules. */
const REFUND = parseCheck(
  { id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }, guidance: 'Look the order up first.', action: 'halt' },
  'mine.yaml',
  'user',
);
const rules = compileRuleSet([REFUND], () => ({ test: () => false }));

const span = (id: string, tool: string, at: number): Span => ({ run_id: 'r1', span_id: id, type: 'tool', name: tool, tool, status: 'ok', start_ms: at, end_ms: at + 1 });
const env = (s: Span): Envelope => ({ project: 'shop', received_ms: s.end_ms!, item: { kind: 'span', span: s } });

describe('Prechecker', () => {
  let windows: MemoryWindowStore<RunWindow>;
  let live: RuleEngine;
  beforeEach(() => {
    windows = new MemoryWindowStore<RunWindow>();
    live = new RuleEngine({ windows, rules: () => rules, steering: () => true });
  });
  const pre = (steering = true) => new Prechecker({ windows, rules: () => rules, steering: () => steering });

  it('halts a refund with no lookup in the run, and saves nothing', async () => {
    await (await live.process([env(span('s1', 'search', 1000))])).commit();
    const before = structuredClone((await windows.load([windowKey('shop', 'r1')])).get(windowKey('shop', 'r1')));
    const answer = await pre().precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()), knownSpans: 1 });
    expect(answer).toMatchObject({ decision: 'halt', check_id: 'refund-without-lookup', text: 'Look the order up first.' });
    expect((await windows.load([windowKey('shop', 'r1')])).get(windowKey('shop', 'r1'))).toEqual(before);
  });

  it('allows it once the lookup is in the window, and allows anything else', async () => {
    await (await live.process([env(span('s1', 'lookup_order', 1000))])).commit();
    expect(await pre().precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()), knownSpans: 1 })).toEqual({ decision: 'allow' });
    expect(await pre().precheck({ project: 'shop', span: { ...span('s3', 'search', Date.now()), run_id: 'r2' } })).toEqual({ decision: 'allow' });
  });

  it('only flags where steering is off: the call is allowed', async () => {
    expect(await pre(false).precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()) })).toEqual({ decision: 'allow' });
  });

  it('waits for the spans exported before it, and says so when they do not come in time', async () => {
    // A generous wait: the span comes well within it, however loaded the machine.
    const asked = pre().precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()), knownSpans: 1, timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 20));
    await (await live.process([env(span('s1', 'lookup_order', 1000))])).commit();
    expect(await asked).toEqual({ decision: 'allow' });
    await expect(pre().precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 5, timeoutMs: 30 })).rejects.toBeInstanceOf(PrecheckTimeoutError);
  });

  it('stops reading the window once its caller gave up (cancelled), however long it was asked to wait', async () => {
    let loads = 0;
    const load = windows.load.bind(windows);
    windows.load = (keys: readonly string[]) => (loads++, load(keys));
    const gaveUp = new AbortController();
    // Spans that never come: the check waits for them, reading the window every poll.
    const asked = pre().precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 5, timeoutMs: 2_147_483_647, signal: gaveUp.signal });
    const failed = asked.catch((e: unknown) => e);
    await until('the check reading the window again', () => loads > 1, 30_000, 5);
    gaveUp.abort();
    const atCancel = loads;
    await new Promise((r) => setTimeout(r, 100));
    expect(loads - atCancel).toBeLessThanOrEqual(1); // a read under way when it gave up, no more
    expect(await failed).toBeInstanceOf(PrecheckCancelledError);
  });

  it("stops waiting at the caller's deadline, however long it was asked to wait", async () => {
    const started = Date.now();
    const err = await pre()
      .precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 5, timeoutMs: 2_147_483_647, deadline: started + 50 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrecheckTimeoutError);
    expect(Date.now() - started).toBeLessThan(2_000);
  }, 10_000);

  it('halts every later call of a run already halted on an earlier span, while its check may halt', async () => {
    const secret = parseCheck(
      { id: 'no-secrets', kind: 'rule', title: 'Secret in a prompt', rule: { type: 'match', pattern: 'sk-[a-z0-9]{8}', in: ['input'], span: { type: ['llm'] } }, guidance: 'Stop: a secret was sent.', action: 'halt' },
      'mine.yaml',
      'user',
    );
    const budget = parseCheck({ id: 'token-budget', kind: 'rule', title: 'Token budget', rule: { type: 'threshold', metric: 'total_tokens', at_least: 1000 }, action: 'halt' }, 'mine.yaml', 'user');
    const set = compileRuleSet([secret, budget, REFUND], (_c, p) => {
      const re = new RegExp(p);
      return { test: (t: string) => re.test(t) };
    });
    let quiet = false;
    let steering = true;
    const engine = new RuleEngine({ windows, rules: () => set, steering: () => steering });
    const checker = new Prechecker({ windows, rules: () => set, steering: () => steering, quiet: () => quiet });
    const llm = (run: string, id: string, extra: Partial<Span>): Envelope =>
      env({ run_id: run, span_id: id, type: 'llm', name: 'chat', status: 'ok', start_ms: 1000, end_ms: 1001, ...extra });
    const out = await engine.process([llm('r1', 'l1', { input: 'my key sk-abcdefgh' }), llm('r2', 'l1', { usage: { total_tokens: 5000 } })]);
    await out.commit();
    expect(out.notes.map((n) => [n.run_id, n.check_id, n.kind])).toEqual([
      ['r1', 'no-secrets', 'halt'],
      ['r2', 'token-budget', 'halt'],
    ]);
    // A tool call no rule names in itself, after the halt: halted, naming the halt that stands.
    const call = (run: string) => ({ ...span('t1', 'search', Date.now()), run_id: run });
    expect(await checker.precheck({ project: 'shop', span: call('r1'), knownSpans: 1 })).toEqual({
      decision: 'halt',
      check_id: 'no-secrets',
      finding_id: out.findings[0].id,
      title: 'Secret in a prompt',
      text: 'Stop: a secret was sent.',
    });
    expect(await checker.precheck({ project: 'shop', span: call('r2'), knownSpans: 1 })).toMatchObject({ decision: 'halt', check_id: 'token-budget', finding_id: out.findings[1].id });
    // A fresh run is not halted; nor is a halted one once its check went quiet or steering is off.
    expect(await checker.precheck({ project: 'shop', span: call('r3') })).toEqual({ decision: 'allow' });
    quiet = true;
    expect(await checker.precheck({ project: 'shop', span: call('r1'), knownSpans: 1 })).toEqual({ decision: 'allow' });
    quiet = false;
    steering = false;
    expect(await checker.precheck({ project: 'shop', span: call('r2'), knownSpans: 1 })).toEqual({ decision: 'allow' });
  });

  it('names the tools a halting rule acts on, per project', () => {
    expect(haltingTools(rules, 'shop', 'refunds')).toEqual(['issue_refund']);
    const scoped = compileRuleSet([{ ...REFUND, applies_to: { project: ['other'] } }], () => ({ test: () => false }));
    expect(haltingTools(scoped, 'shop', undefined)).toEqual([]);
  });
});
