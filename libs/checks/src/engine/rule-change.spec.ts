import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { JournalWindowStore, MemoryWindowStore } from '@neatroots/platform';
import type { WindowStore } from '@neatroots/ports';
import type { Envelope } from '@neatroots/spans';
import type { RuleCheck, RuleSpec } from '../types';
import { RuleEngine, type RuleSet } from './engine';
import { compileRuleSet } from './ruleset';
import type { RunWindow } from './window';

/**
 * A check edited while its runs go on (hot reload): same id, another rule type. Its state in a
 * run's window was made by the old type: the new one starts afresh, and the run's other checks
 * go on. And a rule that throws on a span leaves it unseen, so the span is evaluated again.
 */

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const stores: [string, () => WindowStore<RunWindow>][] = [
  ['MemoryWindowStore', () => new MemoryWindowStore<RunWindow>()],
  [
    'JournalWindowStore (the embedded default)',
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-rule-change-'));
      dirs.push(dir);
      return JournalWindowStore.open<RunWindow>({ dir, name: 'runs' });
    },
  ],
];

const rule = (id: string, spec: RuleSpec): RuleCheck => ({ id, kind: 'rule', title: id, rule: spec, action: 'flag', source: 'user' });
const never = () => ({ test: () => false });
const call = (run: string, id: string, extra: Record<string, unknown> = {}): Envelope => ({
  project: 'p',
  received_ms: 1_000,
  item: { kind: 'span', span: { run_id: run, span_id: id, type: 'tool', name: 'a', tool: 'a', status: 'ok', input: {}, start_ms: 1_000, end_ms: 1_001, ...extra } },
});

describe.each(stores)('a check whose rule type changed while its runs go on, over %s', (_name, open) => {
  let windows: WindowStore<RunWindow>;
  let set: RuleSet;
  let engine: RuleEngine;
  beforeEach(() => {
    windows = open();
    set = compileRuleSet([rule('calls', { type: 'count', span: { type: ['tool'] }, at_least: 5 })], never);
    engine = new RuleEngine({ windows, rules: () => set });
  });
  const step = async (envs: Envelope[]) => {
    const out = await engine.process(envs);
    await out.commit();
    return out.findings.map((f) => `${f.check_id}:${f.run_id}:${f.status}`);
  };

  it.each([
    ['repeat', { type: 'repeat', span: { type: ['tool'] }, same: ['tool'], at_least: 3 }],
    ['errors', { type: 'errors', span: { type: ['tool'] }, at_least: 1 }],
    ['requires_before', { type: 'requires_before', call: { tool: ['a'] }, requires: { tool: ['lookup'] } }],
  ] as [string, RuleSpec][])('count -> %s: the new type starts afresh, and the run\'s other checks run', async (type, spec) => {
    await step([call('r1', 's1')]);
    set = compileRuleSet([rule('calls', spec), rule('other', { type: 'count', span: { type: ['tool'] }, at_least: 1 })], never);
    expect(await step([call('r1', 's2'), call('r2', 's1')])).toEqual(['other:r1:raised', 'other:r2:raised']);
    const more = await step([call('r1', 's3', type === 'errors' ? { status: 'error' } : {}), call('r1', 's4')]);
    if (type === 'repeat') expect(more).toEqual(['calls:r1:raised']); // s2, s3, s4: its own three
    if (type === 'errors') expect(more).toEqual(['calls:r1:raised', 'calls:r1:resolved']);
  });

  it('count -> threshold: the count\'s `fired` does not keep the threshold from firing', async () => {
    set = compileRuleSet([rule('budget', { type: 'count', span: { type: ['tool'] }, at_least: 1 })], never);
    expect(await step([call('r1', 's1')])).toEqual(['budget:r1:raised']);
    set = compileRuleSet([rule('budget', { type: 'threshold', metric: 'total_tokens', at_least: 1_000 })], never);
    expect(await step([call('r1', 's2', { type: 'llm', usage: { total_tokens: 5_000 } })])).toEqual(['budget:r1:raised']);
  });

  it('a rule that throws on a span leaves it unseen: the batch delivered again runs every rule on it', async () => {
    let fail = false;
    set = compileRuleSet(
      [rule('secret', { type: 'match', span: {}, pattern: 'sk-', in: ['input'] }), rule('other', { type: 'count', span: { type: ['tool'] }, at_least: 2 })],
      () => ({
        test: () => {
          if (fail) throw new Error('the matcher failed');
          return false;
        },
      }),
    );
    expect(await step([call('r1', 's0', { input: 'x' })])).toEqual([]);
    fail = true;
    await expect(engine.process([call('r1', 's1', { input: 'x' })])).rejects.toThrow('the matcher failed');
    fail = false;
    const out = await engine.process([call('r1', 's1', { input: 'x' })]);
    await out.commit();
    expect(out.findings.map((f) => `${f.check_id}:${f.run_id}:${f.status}`)).toEqual(['other:r1:raised']);
    const w = (await windows.load(['p\u0000r1'])).get('p\u0000r1')!;
    expect(w.metrics).toMatchObject({ spans: 2, tool_calls: 2 });
  });
});
