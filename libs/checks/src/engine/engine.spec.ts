import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MemoryWindowStore } from '@neatroots/platform';
import type { WindowSave } from '@neatroots/ports';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import type { FindingEvent, RuleCheck, RuleSpec } from '../types';
import { RuleEngine, type NoteOut } from './engine';
import { RAISED_KEPT } from './rules/requires-before';
import { compileRuleSet } from './ruleset';
import { windowKey, type RunWindow } from './window';

function rule(id: string, spec: RuleSpec, extra: Partial<RuleCheck> = {}): RuleCheck {
  return { id, kind: 'rule', title: id, rule: spec, action: 'flag', source: 'user', ...extra };
}

const regexMatcher = (_c: RuleCheck, pattern: string) => {
  const re = new RegExp(pattern.replace(/^\(\?i\)/, ''), pattern.startsWith('(?i)') ? 'i' : '');
  return { test: (s: string) => re.test(s) };
};

/** Drives the engine the way replay does: items in order, the clock from their timestamps. */
class Harness {
  readonly windows = new MemoryWindowStore<RunWindow>();
  readonly findings: FindingEvent[] = [];
  readonly notes: NoteOut[] = [];
  readonly engine: RuleEngine;
  private t = 1_000_000;

  constructor(checks: RuleCheck[], opts: { steering?: boolean; quiet?: string[] } = {}) {
    const set = compileRuleSet(checks, regexMatcher);
    this.engine = new RuleEngine({
      windows: this.windows,
      rules: () => set,
      steering: () => opts.steering ?? false,
      quiet: (_p, id) => opts.quiet?.includes(id) ?? false,
    });
  }

  /** Sends items; `at` moves the clock (ms since the harness start) before they arrive. */
  async send(raw: Record<string, unknown>[], at?: number): Promise<void> {
    if (at !== undefined) this.t = 1_000_000 + at;
    await this.collect(await this.engine.tick(this.t));
    const envs: Envelope[] = raw.map((r) => ({ project: 'p', received_ms: this.t, item: normalizeItem(r) }));
    await this.collect(await this.engine.process(envs));
  }

  async advance(ms: number): Promise<void> {
    this.t += ms;
    await this.collect(await this.engine.tick(this.t));
  }

  private async collect(out: { findings: FindingEvent[]; notes: NoteOut[]; commit(): Promise<void> }): Promise<void> {
    this.findings.push(...out.findings);
    this.notes.push(...out.notes);
    await out.commit();
  }

  statuses(checkId?: string): string[] {
    return this.findings.filter((f) => !checkId || f.check_id === checkId).map((f) => `${f.status}:${f.run_id}:${f.count}`);
  }
}

const tool = (run: string, id: string, name: string, input: unknown, extra: Record<string, unknown> = {}) => ({
  run_id: run,
  span_id: id,
  type: 'tool',
  tool: name,
  input,
  ...extra,
});

describe('repeat', () => {
  const check = rule('rep', { type: 'repeat', span: { type: ['tool', 'mcp_tool'] }, same: ['tool', 'input'], at_least: 3 }, {
    guidance: 'You have called {tool} {count} times with the same arguments ({args}).',
  });

  it('raises at the third identical call, grows with the streak, resolves on a differing call, and starts a new streak', async () => {
    const h = new Harness([check]);
    await h.send([tool('r1', 's1', 'search', { q: 'a' }), tool('r1', 's2', 'search', { q: 'a' })]);
    expect(h.findings).toHaveLength(0);
    await h.send([tool('r1', 's3', 'search', { q: 'a' })]);
    expect(h.findings[0]).toMatchObject({ status: 'raised', span_ids: ['s1', 's2', 's3'], count: 3 });
    expect(h.findings[0].guidance).toBe('You have called search 3 times with the same arguments ({"q":"a"}).');
    await h.send([tool('r1', 's4', 'search', { q: 'a' })]);
    expect(h.findings[1]).toMatchObject({ status: 'updated', count: 4, id: h.findings[0].id });
    await h.send([tool('r1', 's5', 'search', { q: 'b' })]);
    expect(h.findings[2]).toMatchObject({ status: 'resolved', id: h.findings[0].id });
    // The resolution speaks of the streak, not of the call that ended it.
    expect(h.findings[2].guidance).toBe('You have called search 4 times with the same arguments ({"q":"a"}).');
    await h.send([tool('r1', 's6', 'search', { q: 'b' }), tool('r1', 's7', 'search', { q: 'b' })]);
    expect(h.findings[3]).toMatchObject({ status: 'raised', span_ids: ['s5', 's6', 's7'], count: 3 });
    expect(h.findings[3].id).not.toBe(h.findings[0].id);
  });

  it('compares arguments by value, not key order, and ignores spans the filter leaves out', async () => {
    const h = new Harness([check]);
    await h.send([
      tool('r1', 's1', 'search', { a: 1, b: 2 }),
      { run_id: 'r1', span_id: 'l1', type: 'llm', name: 'chat' },
      tool('r1', 's2', 'search', { b: 2, a: 1 }),
      tool('r1', 's3', 'search', { a: 1, b: 2 }),
    ]);
    expect(h.statuses()).toEqual(['raised:r1:3']);
  });

  it('keeps the streaks of two interleaved runs apart', async () => {
    const h = new Harness([check]);
    await h.send([
      tool('r1', 's1', 'search', { q: 'x' }),
      tool('r2', 's1', 'search', { q: 'y' }),
      tool('r1', 's2', 'search', { q: 'x' }),
      tool('r2', 's2', 'fetch', { q: 'y' }),
      tool('r1', 's3', 'search', { q: 'x' }),
      tool('r2', 's3', 'search', { q: 'y' }),
    ]);
    expect(h.statuses()).toEqual(['raised:r1:3']);
  });

  it('counts a span exported twice once', async () => {
    const h = new Harness([check]);
    await h.send([tool('r1', 's1', 'search', { q: 'a' }), tool('r1', 's2', 'search', { q: 'a' })]);
    await h.send([tool('r1', 's2', 'search', { q: 'a' })]);
    expect(h.findings).toHaveLength(0);
    await h.send([tool('r1', 's3', 'search', { q: 'a' })]);
    expect(h.statuses()).toEqual(['raised:r1:3']);
  });
});

describe('errors', () => {
  it('raises on consecutive failures and resolves at the next success', async () => {
    const h = new Harness([rule('err', { type: 'errors', span: { type: ['tool'] }, at_least: 2 })]);
    await h.send([tool('r', 'a', 't', 1, { error: 'boom' }), tool('r', 'b', 't', 1, { status: 'ok' })]);
    expect(h.findings).toHaveLength(0);
    await h.send([tool('r', 'c', 't', 1, { error: 'boom' }), tool('r', 'd', 'u', 1, { error: 'bang' })]);
    expect(h.statuses()).toEqual(['raised:r:2']);
    await h.send([tool('r', 'e', 't', 1, { status: 'error' })]);
    await h.send([tool('r', 'f', 't', 1)]);
    expect(h.statuses()).toEqual(['raised:r:2', 'updated:r:3', 'resolved:r:3']);
  });
});

describe('count, slow, threshold', () => {
  it('count fires once per run', async () => {
    const h = new Harness([rule('cnt', { type: 'count', span: { tool: ['search'] }, at_least: 2 })]);
    await h.send([tool('r', 'a', 'search', 1), tool('r', 'b', 'other', 1), tool('r', 'c', 'search', 2), tool('r', 'd', 'search', 3)]);
    expect(h.statuses()).toEqual(['raised:r:2']);
  });

  it('slow raises a finding per slow span with {ms}', async () => {
    const h = new Harness([
      rule('slow', { type: 'slow', span: {}, at_least_ms: 1000 }, { guidance: '{name} took {ms} ms' }),
    ]);
    await h.send([
      tool('r', 'a', 'fetch', 1, { start_ms: 0, end_ms: 999 }),
      tool('r', 'b', 'fetch', 1, { start_ms: 0, end_ms: 1500 }),
      tool('r', 'c', 'fetch', 1, { start_ms: 10, end_ms: 5010 }),
    ]);
    expect(h.findings.map((f) => [f.span_ids[0], f.guidance])).toEqual([
      ['b', 'fetch took 1500 ms'],
      ['c', 'fetch took 5000 ms'],
    ]);
  });

  it('threshold fires when a run metric reaches at_least', async () => {
    const h = new Harness([
      rule('tok', { type: 'threshold', metric: 'total_tokens', at_least: 1000 }, { guidance: '{metric} reached {value}' }),
      rule('dur', { type: 'threshold', metric: 'duration_ms', at_least: 60_000 }),
    ]);
    await h.send([{ run_id: 'r', span_id: 'l1', type: 'llm', usage: { input_tokens: 400, output_tokens: 200 }, start_ms: 0, end_ms: 10 }]);
    await h.send([{ run_id: 'r', span_id: 'l2', type: 'llm', usage: { total_tokens: 500 }, start_ms: 70_000, end_ms: 70_010 }]);
    expect(h.findings.map((f) => `${f.check_id}:${f.guidance}`)).toEqual(['tok:total_tokens reached 1100', 'dur:dur']);
  });

  it('threshold duration_ms counts from run_start when the run sent one', async () => {
    const h = new Harness([rule('dur', { type: 'threshold', metric: 'duration_ms', at_least: 60_000 }, { guidance: '{metric} reached {value}' })]);
    // The audit's replay r2: a run that started at 1 s, its one span at 50 s, its end at 62 s.
    await h.send([
      { event: 'run_start', run_id: 'r2', workflow: 'support', ts_ms: 1000 },
      { run_id: 'r2', span_id: 'a', type: 'tool', tool: 'x', start_ms: 50_000, end_ms: 50_001 },
      { event: 'run_end', run_id: 'r2', status: 'ok', ts_ms: 62_000 },
    ]);
    expect(h.findings.map((f) => `${f.check_id}:${f.run_id}:${f.guidance}`)).toEqual(['dur:r2:duration_ms reached 61000']);
  });
});

describe('match', () => {
  const secret = rule('secret', { type: 'match', span: {}, pattern: '(?i)api[_-]?key', in: ['input', 'output', 'error', 'name'] });

  it('reads MCP content[].text like plain output and joins later matches to one finding per run', async () => {
    const h = new Harness([secret]);
    await h.send([
      { run_id: 'r', span_id: 'm1', type: 'mcp_tool', tool: 'read', output: { content: [{ type: 'text', text: 'the API_KEY is 123' }] } },
      tool('r', 't2', 'x', { note: 'api-key here' }),
    ]);
    expect(h.statuses()).toEqual(['raised:r:1', 'updated:r:2']);
    expect(h.findings[1].span_ids).toEqual(['m1', 't2']);
  });

  it('reads only the first 200,000 characters of a span', async () => {
    const h = new Harness([secret]);
    const pad = 'x'.repeat(199_990);
    await h.send([tool('r', 'early', 't', null, { output: `${pad}api_key${'y'.repeat(100_000)}` })]);
    await h.send([tool('r2', 'late', 't', null, { output: `${'x'.repeat(250_000)}api_key${'y'.repeat(43_000)}` })]);
    expect(h.findings.map((f) => f.run_id)).toEqual(['r']);
  });

  it('only looks in the fields named by `in`', async () => {
    const h = new Harness([rule('m', { type: 'match', span: {}, pattern: 'refund', in: ['output'] })]);
    await h.send([tool('r', 'a', 'refund', { why: 'refund' }, { output: 'ok' })]);
    expect(h.findings).toHaveLength(0);
  });
});

describe('requires_before', () => {
  const check = rule('refund', { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }, {
    guidance: 'Call {requires} before {tool}.',
  });

  it('waits 250 ms for a late span that started earlier', async () => {
    const h = new Harness([check]);
    await h.send([tool('r', 'refund', 'issue_refund', {}, { start_ms: 200, end_ms: 300 })], 0);
    await h.send([tool('r', 'lookup', 'lookup_order', {}, { start_ms: 100, end_ms: 150 })], 100);
    await h.advance(1000);
    expect(h.findings).toHaveLength(0);
  });

  it('raises after the wait, and resolves when the earlier call turns up later', async () => {
    const h = new Harness([check]);
    await h.send([tool('r', 'refund', 'issue_refund', {}, { start_ms: 200, end_ms: 300 })], 0);
    await h.advance(249);
    expect(h.findings).toHaveLength(0);
    await h.advance(1);
    expect(h.findings[0]).toMatchObject({ status: 'raised', span_ids: ['refund'], guidance: 'Call lookup_order before issue_refund.' });
    await h.send([tool('r', 'lookup', 'lookup_order', {}, { start_ms: 100, end_ms: 150 })], 2000);
    expect(h.statuses()).toEqual(['raised:r:1', 'resolved:r:1']);
    // The resolution says what the raise said, the call named.
    expect(h.findings[1].guidance).toBe('Call lookup_order before issue_refund.');
  });

  it('keeps a long run of calls without the required one bounded, and still resolves the latest when it turns up late', async () => {
    const h = new Harness([check]);
    const calls = RAISED_KEPT * 5;
    // One refund every 300 ms, none with a lookup: each waits its 250 ms and is raised.
    for (let n = 1; n <= calls; n++) await h.send([tool('r', `refund${n}`, 'issue_refund', {}, { start_ms: n * 1000, end_ms: n * 1000 + 10 })], n * 300);
    await h.advance(1000);
    expect(h.statuses()).toHaveLength(calls);
    const w = (await h.windows.load([windowKey('p', 'r')])).get(windowKey('p', 'r'))!;
    const st = w.checks.refund as unknown as { raised: { span: string }[] };
    // The window holds the calls that started last, not all of them.
    expect(st.raised.map((f) => f.span)).toEqual(Array.from({ length: RAISED_KEPT }, (_, i) => `refund${calls - RAISED_KEPT + 1 + i}`));
    expect(JSON.stringify(w.checks).length).toBeLessThan(100 * RAISED_KEPT);
    // A lookup that started before the last three refunds turns up late: those three resolve.
    await h.send([tool('r', 'lookup', 'lookup_order', {}, { start_ms: (calls - 3) * 1000 + 500, end_ms: (calls - 3) * 1000 + 600 })]);
    const resolved = h.findings.filter((f) => f.status === 'resolved');
    expect(resolved.map((f) => f.span_ids[0])).toEqual([`refund${calls - 2}`, `refund${calls - 1}`, `refund${calls}`]);
    expect(resolved.map((f) => f.id)).toEqual(h.findings.slice(calls - 3, calls).map((f) => f.id));
    // One that started before all of them resolves the rest of the calls kept.
    await h.send([tool('r', 'lookup0', 'lookup_order', {}, { start_ms: 1, end_ms: 2 })]);
    expect(h.findings.filter((f) => f.status === 'resolved')).toHaveLength(RAISED_KEPT);
  });

  it('is satisfied by an earlier successful call only', async () => {
    const h = new Harness([check]);
    await h.send([
      tool('r', 'l1', 'lookup_order', {}, { start_ms: 100, end_ms: 150, error: 'not found' }),
      tool('r', 'refund', 'issue_refund', {}, { start_ms: 200, end_ms: 300 }),
      tool('r', 'l2', 'lookup_order', {}, { start_ms: 400, end_ms: 450 }),
    ]);
    await h.advance(300);
    expect(h.statuses()).toEqual(['raised:r:1']);
  });
});

describe('unrecovered_error and run_end', () => {
  const unrec = rule('unrec', { type: 'unrecovered_error', span: { type: ['tool'] } }, { guidance: '{tool} failed' });

  it('fires at run end when a tool last failed and the answer says nothing failed', async () => {
    const h = new Harness([unrec]);
    await h.send([
      tool('r', 'a', 'pay', 1, { start_ms: 1, error: 'declined' }),
      tool('r', 'b', 'mail', 1, { start_ms: 2, error: 'smtp' }),
      tool('r', 'c', 'mail', 1, { start_ms: 3 }),
      { event: 'run_end', run_id: 'r', status: 'ok', final_output: 'All done, your order is confirmed.' },
    ]);
    expect(h.findings).toHaveLength(1);
    expect(h.findings[0]).toMatchObject({ span_ids: ['a'], guidance: 'pay failed' });
  });

  it('stays quiet when the answer admits the failure or a later call succeeded', async () => {
    const h = new Harness([unrec]);
    await h.send([
      tool('r1', 'a', 'pay', 1, { start_ms: 1, error: 'declined' }),
      { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'Sorry, the payment could not be completed.' },
      tool('r2', 'a', 'pay', 1, { start_ms: 1, error: 'declined' }),
      tool('r2', 'b', 'pay', 1, { start_ms: 2 }),
      { event: 'run_end', run_id: 'r2', status: 'ok', final_output: 'Paid.' },
    ]);
    expect(h.findings).toHaveLength(0);
  });

  it('weighs a failed call that arrives after run_end against the answer run_end gave', async () => {
    const h = new Harness([unrec]);
    await h.send([
      tool('r1', 'a', 'find', 1, { start_ms: 1 }),
      { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'Your table is booked.' },
      // exported after the root span (another process, a later export): the booking had failed
      tool('r1', 'b', 'book', 1, { start_ms: 2, error: 'no tables' }),
      // an answer that admits the failure stays quiet, late spans or not
      tool('r2', 'a', 'find', 1, { start_ms: 1 }),
      { event: 'run_end', run_id: 'r2', status: 'ok', final_output: 'Sorry, I could not book it.' },
      tool('r2', 'b', 'book', 1, { start_ms: 2, error: 'no tables' }),
      // a run that had no tool call before its end
      { event: 'run_end', run_id: 'r3', status: 'ok', final_output: 'Done.' },
      tool('r3', 'a', 'pay', 1, { start_ms: 1, error: 'declined' }),
    ]);
    expect(h.findings.map((f) => [f.run_id, f.span_ids, f.guidance])).toEqual([
      ['r1', ['b'], 'book failed'],
      ['r3', ['a'], 'pay failed'],
    ]);
  });

  it('a failed call after run_end grows the finding run_end raised: `updated` with both spans, one note, one id', async () => {
    const h = new Harness([unrec]);
    await h.send([
      tool('r', 's92', 'pay', 1, { start_ms: 1, error: 'declined' }),
      { event: 'run_end', run_id: 'r', status: 'ok', final_output: 'Your order is on its way.' },
    ]);
    // exported after the root span: another tool failed too
    await h.send([tool('r', 's98', 'mail', 1, { start_ms: 2, error: 'smtp' })]);
    expect(h.findings.map((f) => [f.status, f.span_ids, f.count, f.guidance])).toEqual([
      ['raised', ['s92'], 1, 'pay failed'],
      ['updated', ['s92', 's98'], 2, 'pay, mail failed'],
    ]);
    expect(new Set(h.findings.map((f) => f.id)).size).toBe(1);
    expect(h.notes).toHaveLength(1);
  });

  it('a tool or span named like an Object property (constructor, toString, __proto__) is a tool or span like any other', async () => {
    const h = new Harness([unrec]);
    await h.send([
      tool('r', 'constructor', 'constructor', 1, { start_ms: 1, error: 'boom' }),
      tool('r', 'toString', 'toString', 1, { start_ms: 2, error: 'boom' }),
      tool('r', '__proto__', '__proto__', 1, { start_ms: 3, error: 'boom' }),
      tool('r', 'ok', 'hasOwnProperty', 1, { start_ms: 4 }),
      { event: 'run_end', run_id: 'r', status: 'ok', final_output: 'All done.' },
    ]);
    expect(h.findings).toHaveLength(1);
    expect(h.findings[0].span_ids.slice().sort()).toEqual(['__proto__', 'constructor', 'toString']);
    expect(h.findings[0].guidance).toBe('constructor, toString, __proto__ failed');
  });

  it('a check whose id is an Object property name (constructor) keeps its own state, over a window read back from JSON too', async () => {
    const h = new Harness([rule('constructor', { type: 'count', span: { type: ['tool'] }, at_least: 2 })]);
    await h.send([tool('r', 's1', 'search', 1)]);
    // the window as a store that parses JSON hands it out (Redis, the journal read back)
    const key = 'p\u0000r';
    const w = (await h.windows.load([key])).get(key)!;
    const parsed = JSON.parse(JSON.stringify(w)) as RunWindow;
    parsed.rev = (w.rev ?? 0) + 1;
    await h.windows.save([{ key, window: parsed, expectRev: w.rev ?? 0 }]);
    await h.send([tool('r', 's2', 'search', 1)]);
    expect(h.statuses('constructor')).toEqual(['raised:r:2']);
    expect(typeof Object.prototype.constructor).toBe('function');
    expect((Object as unknown as { n?: number }).n).toBeUndefined();
  });

  it('run_end fires for the listed endings only, once even if run_end is sent twice', async () => {
    const h = new Harness([rule('end', { type: 'run_end', ends: ['error', 'interrupted'] })]);
    await h.send([{ event: 'run_end', run_id: 'a', status: 'ok' }, { event: 'run_end', run_id: 'b', status: 'error' }]);
    await h.send([{ event: 'run_end', run_id: 'b', status: 'error' }, { event: 'run_end', run_id: 'c', status: 'no_output' }]);
    expect(h.statuses()).toEqual(['raised:b:1']);
  });
});

describe('notes, halts, groups and quiet checks', () => {
  const loop = (source: RuleCheck['source'], action: 'flag' | 'halt') =>
    rule('loop', { type: 'count', span: { type: ['tool'] }, at_least: 2 }, { source, action, group: 'loop', guidance: 'Stop looping' });

  it('halts only for the user\'s own rules (files, or saved by a person) with steering on', async () => {
    for (const [source, steering, kind] of [
      ['user', true, 'halt'],
      ['project', true, 'halt'],
      // the loader lets a database check say halt only when a person saved it (app, CLI)
      ['database', true, 'halt'],
      ['user', false, 'note'],
      ['database', false, 'note'],
      ['library', true, 'note'],
    ] as const) {
      const h = new Harness([loop(source, 'halt')], { steering });
      await h.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 2)]);
      expect([source, steering, h.notes[0].kind]).toEqual([source, steering, kind]);
      expect(h.findings[0].halt_suppressed ?? false).toBe(kind !== 'halt');
    }
  });

  it('sends one note per group per run, headed by the first finding', async () => {
    const h = new Harness([
      loop('user', 'flag'),
      rule('rep', { type: 'repeat', span: { type: ['tool'] }, same: ['tool'], at_least: 2 }, { group: 'loop' }),
    ]);
    await h.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 2)]);
    expect(h.findings.map((f) => f.check_id).sort()).toEqual(['loop', 'rep']);
    expect(h.notes).toHaveLength(1);
    expect(h.findings.every((f) => f.group === 'loop')).toBe(true);
  });

  it('records a quiet check\'s findings without sending notes', async () => {
    const h = new Harness([loop('user', 'flag')], { quiet: ['loop'] });
    await h.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 2)]);
    expect(h.findings).toHaveLength(1);
    expect(h.notes).toHaveLength(0);
  });

  it('a quiet halting check halts nothing, and its finding says so (flag, halt_suppressed)', async () => {
    const h = new Harness([loop('user', 'halt')], { steering: true, quiet: ['loop'] });
    await h.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 2)]);
    expect(h.notes).toHaveLength(0);
    expect(h.findings).toEqual([expect.objectContaining({ status: 'raised', action: 'flag', halt_suppressed: true })]);
  });

  it('keeps the halts a run was sent in its window until they resolve (the pre-call check halts the run\'s later calls)', async () => {
    const h = new Harness([rule('rep', { type: 'repeat', span: { type: ['tool'] }, same: ['tool'], at_least: 2 }, { action: 'halt', guidance: 'Stop' })], { steering: true });
    await h.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 2)]);
    const id = h.findings[0].id;
    const halts = async () => (await h.windows.load([windowKey('p', 'r')])).get(windowKey('p', 'r'))!.halts;
    expect(await halts()).toEqual({ [id]: { check_id: 'rep', title: 'rep', text: 'Stop' } });
    await h.send([tool('r', 'c', 'other', 3)]);
    expect(h.statuses()).toEqual(['raised:r:2', 'resolved:r:2']);
    expect(await halts()).toEqual({});
  });
});

describe('applies_to and state outside the process', () => {
  it('applies a check only to the named workflow', async () => {
    const h = new Harness([rule('c', { type: 'count', span: {}, at_least: 1 }, { applies_to: { workflow: ['refund-agent'] } })]);
    await h.send([
      { event: 'run_start', run_id: 'a', workflow: 'refund-agent' },
      tool('a', 's', 't', 1),
      { event: 'run_start', run_id: 'b', workflow: 'other' },
      tool('b', 's', 't', 1),
    ]);
    expect(h.statuses()).toEqual(['raised:a:1']);
  });

  it('continues a streak from a serialised window (another replica takes over)', async () => {
    const check = rule('rep', { type: 'repeat', span: {}, same: ['tool'], at_least: 3 });
    const h1 = new Harness([check]);
    await h1.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 1)]);
    const h2 = new Harness([check]);
    const saved = await h1.windows.load(['p\u0000r']);
    await h2.windows.save([...saved].map(([key, w]) => ({ key, window: JSON.parse(JSON.stringify(w)) as RunWindow })));
    await h2.send([tool('r', 'b', 't', 1), tool('r', 'c', 't', 1)]);
    expect(h2.findings[0]).toMatchObject({ status: 'raised', span_ids: ['a', 'b', 'c'] });
    const fresh = new Harness([check]);
    await fresh.send([tool('r', 'a', 't', 1), tool('r', 'b', 't', 1), tool('r', 'c', 't', 1)]);
    expect(h2.findings[0].id).toBe(fresh.findings[0].id);
  });
});

/** Every entry saved to `windows` from now on, in order (the store still saves them). */
function recordSaves(windows: MemoryWindowStore<RunWindow>): WindowSave<RunWindow>[] {
  const saved: WindowSave<RunWindow>[] = [];
  const save = windows.save.bind(windows);
  windows.save = async (entries) => {
    saved.push(...entries);
    return save(entries);
  };
  return saved;
}

describe('window expiry', () => {
  it('saves a run\'s window to expire the configured time after its run_end (late spans), and later while it runs', async () => {
    const windows = new MemoryWindowStore<RunWindow>();
    const saved = recordSaves(windows);
    const set = compileRuleSet([], regexMatcher);
    const engine = new RuleEngine({ windows, rules: () => set, ttlAfterEndMs: 1234, ttlIdleMs: 99_999 });
    const env = (raw: Record<string, unknown>): Envelope => ({ project: 'p', received_ms: 1, item: normalizeItem(raw) });
    await (await engine.process([env(tool('r', 'a', 't', 1))])).commit();
    await (await engine.process([env({ event: 'run_end', run_id: 'r', status: 'ok' })])).commit();
    expect(saved.map((s) => s.ttlMs)).toEqual([99_999, 1234]);
    // Saved at rest once ended: a store may keep it out of memory (WindowSave.rest).
    expect(saved.map((s) => s.rest)).toEqual([undefined, true]);
  });

  it('goes on from an ended run\'s window its store moved out of memory: a late span counts, a redelivered one does not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-rest-'));
    try {
      // No window at rest stays in memory: every ended run's goes to the spill file.
      const windows = new MemoryWindowStore<RunWindow>({ maxResting: 0, spillFile: path.join(dir, 'runs.spill') });
      const set = compileRuleSet([rule('rep', { type: 'repeat', span: { tool: ['search'] }, same: ['tool', 'input'], at_least: 3 })], regexMatcher);
      const engine = new RuleEngine({ windows, rules: () => set });
      const findings: FindingEvent[] = [];
      const step = async (...raw: Record<string, unknown>[]) => {
        const out = await engine.process(raw.map((r) => ({ project: 'p', received_ms: 1, item: normalizeItem(r) })));
        findings.push(...out.findings);
        await out.commit();
      };
      await step(tool('r', 's1', 'search', { q: 'a' }), tool('r', 's2', 'search', { q: 'a' }), { event: 'run_end', run_id: 'r', status: 'ok' });
      expect(windows.size).toBe(0);
      expect(windows.spilled).toBe(1);
      await step(tool('r', 's2', 'search', { q: 'a' })); // the same span again: nothing
      expect(findings).toEqual([]);
      await step(tool('r', 's3', 'search', { q: 'a' })); // late, the third identical call
      expect(findings.map((f) => `${f.status}:${f.count}`)).toEqual(['raised:3']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('saves an ended run\'s window at rest only once no requires_before wait is left in it', async () => {
    const windows = new MemoryWindowStore<RunWindow>();
    const saved = recordSaves(windows);
    const set = compileRuleSet([rule('rb', { type: 'requires_before', call: { tool: ['refund'] }, requires: { tool: ['lookup'] } })], regexMatcher);
    const engine = new RuleEngine({ windows, rules: () => set });
    const env = (raw: Record<string, unknown>, at: number): Envelope => ({ project: 'p', received_ms: at, item: normalizeItem(raw) });
    // The refund waits for its lookup (which may still arrive); the run ends meanwhile.
    await (await engine.process([env(tool('r', 'a', 'refund', 1), 1_000), env({ event: 'run_end', run_id: 'r', status: 'ok' }, 1_010)])).commit();
    const waiting = saved.length;
    const fired = await engine.tick(Number.MAX_SAFE_INTEGER);
    await fired.commit();
    expect(fired.findings.map((f) => f.check_id)).toEqual(['rb']);
    const rests = saved.map((e) => e.rest);
    expect(rests.slice(0, waiting)).not.toContain(true);
    expect(rests[rests.length - 1]).toBe(true);
  });
});

describe('wakes of windows that are gone', () => {
  const set = compileRuleSet([rule('rb', { type: 'requires_before', call: { tool: ['refund'] }, requires: { tool: ['lookup'] } })], regexMatcher);
  const env = (raw: Record<string, unknown>, at: number): Envelope => ({ project: 'p', received_ms: at, item: normalizeItem(raw) });
  const key = windowKey('p', 'r');

  it('a tick clears the wake it took of a window that expired, instead of taking it again every lease', async () => {
    let now = 1_000;
    const windows = new MemoryWindowStore<RunWindow>({ now: () => now });
    const engine = new RuleEngine({ windows, rules: () => set, ttlIdleMs: 1_000 });
    await (await engine.process([env(tool('r', 'a', 'refund', 1), now)])).commit();
    expect(windows.wakeOf(key)).toBe(1_250);
    // No tick ran while the window lived (a process down, a stalled timer): it expired meanwhile.
    now += 60_000;
    for (let i = 0; i < 5; i++, now += 6_000) {
      const out = await engine.tick(now);
      expect(out.findings).toEqual([]);
      await out.commit();
    }
    expect(windows.wakeOf(key)).toBeUndefined();
    expect(windows.wakeList()).toEqual([]);
  });

  it('keeps the wake of a window saved again between the tick that found none and its commit', async () => {
    let now = 1_000;
    const windows = new MemoryWindowStore<RunWindow>({ now: () => now });
    const engine = new RuleEngine({ windows, rules: () => set, ttlIdleMs: 1_000 });
    await (await engine.process([env(tool('r', 'a', 'refund', 1), now)])).commit();
    now += 60_000;
    const tick = await engine.tick(now);
    // A new call of the run comes before the tick's commit: a new window, waiting for its lookup.
    await (await engine.process([env(tool('r', 'b', 'refund', 1), now)])).commit();
    await tick.commit();
    expect(windows.wakeOf(key)).toBe(now + 250);
    now += 300;
    const fired = await engine.tick(now);
    await fired.commit();
    expect(fired.findings.map((f) => [f.check_id, f.span_ids])).toEqual([['rb', ['b']]]);
  });
});
