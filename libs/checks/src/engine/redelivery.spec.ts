import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { JournalWindowStore, MemoryWindowStore } from '@neatroots/platform';
import type { WindowStore } from '@neatroots/ports';
import type { Envelope } from '@neatroots/spans';
import type { RuleCheck, RuleSpec } from '../types';
import { RuleEngine } from './engine';
import { compileRuleSet } from './ruleset';
import { windowKey, type RunWindow } from './window';

/**
 * A step whose findings were never published (its commit() never called) is done again when the
 * bus delivers its batch again, or when its wake comes round: it must raise the same findings,
 * with the same ids, from the windows as they were before it. The embedded stores hand out the
 * windows they hold, so nothing a step changes may reach them before its commit.
 */

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const stores: [string, () => WindowStore<RunWindow>][] = [
  ['MemoryWindowStore', () => new MemoryWindowStore<RunWindow>({ now: () => 1_000 })],
  [
    'JournalWindowStore (the embedded default)',
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-redelivery-'));
      dirs.push(dir);
      return JournalWindowStore.open<RunWindow>({ dir, name: 'runs', now: () => 1_000 });
    },
  ],
];

const rule = (id: string, spec: RuleSpec): RuleCheck => ({ id, kind: 'rule', title: id, rule: spec, action: 'flag', source: 'user' });
const rules = compileRuleSet(
  [
    rule('dropped-table', { type: 'count', span: { tool: ['drop_table'] }, at_least: 2 }),
    rule('refund-without-lookup', { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }),
    rule('tool-failed-quietly', { type: 'unrecovered_error', span: { type: ['tool'] } }),
  ],
  () => ({ test: () => false }),
);
const call = (id: string, tool: string, at = 1_000, status: 'ok' | 'error' = 'ok'): Envelope => ({
  project: 'p',
  received_ms: at,
  item: { kind: 'span', span: { run_id: 'r1', span_id: id, type: 'tool', name: tool, tool, status, start_ms: at, end_ms: at } },
});
const end = (at: number): Envelope => ({
  project: 'p',
  received_ms: at,
  item: { kind: 'run_end', run: { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'Here is your report.', ts_ms: at } },
});

describe.each(stores)('a step never committed, over %s', (_name, open) => {
  let windows: WindowStore<RunWindow>;
  let engine: RuleEngine;
  beforeEach(() => {
    windows = open();
    engine = new RuleEngine({ windows, rules: () => rules, wakeLeaseMs: 100 });
  });
  afterEach(() => windows.close());

  it('raises its finding again, same id, when its batch is delivered again', async () => {
    await (await engine.process([call('s1', 'drop_table')])).commit();
    const failed = await engine.process([call('s2', 'drop_table')]);
    expect(failed.findings.map((f) => f.check_id)).toEqual(['dropped-table']);
    // publishing failed: no commit; the bus delivers the batch again
    const again = await engine.process([call('s2', 'drop_table')]);
    expect(again.findings.map((f) => [f.id, f.status, f.count])).toEqual(failed.findings.map((f) => [f.id, f.status, f.count]));
    await again.commit();
    // saved now: a third delivery is a duplicate
    expect((await engine.process([call('s2', 'drop_table')])).findings).toEqual([]);
  });

  it("is not saved by a later step's commit of the same run", async () => {
    await (await engine.process([call('s1', 'drop_table')])).commit();
    const failed = await engine.process([call('s2', 'drop_table')]);
    expect(failed.findings).toHaveLength(1);
    // a later step on the run (another batch) commits; the abandoned one's span is not in it
    await (await engine.process([call('s3', 'lookup_order')])).commit();
    const again = await engine.process([call('s2', 'drop_table')]);
    expect(again.findings.map((f) => f.id)).toEqual(failed.findings.map((f) => f.id));
  });

  it("leaves a check state's entries as they were: a tool's latest call is the committed one", async () => {
    await (await engine.process([call('s1', 'search', 1_000, 'error')])).commit();
    // a later call of the tool succeeds, in a step never committed
    await engine.process([call('s2', 'search', 2_000)]);
    // the run ends in another step: as far as the windows know, the tool's latest call failed
    const ended = await engine.process([end(3_000)]);
    expect(ended.findings.map((f) => [f.check_id, f.span_ids])).toEqual([['tool-failed-quietly', ['s1']]]);
  });

  it('fires a requires_before wait again, same finding id, when the tick that fired it was never committed', async () => {
    const key = windowKey('p', 'r1');
    await (await engine.process([call('s1', 'issue_refund')])).commit();
    // the 250 ms wait runs out: the tick takes the wake (leased 100 ms) and raises the finding
    const failed = await engine.tick(1_300);
    expect(failed.findings.map((f) => f.check_id)).toEqual(['refund-without-lookup']);
    // publishing failed: no commit; the lease runs out and the wake comes round again
    expect(await windows.takeDue(1_399, 10)).toEqual([]);
    const again = await engine.tick(1_401);
    expect(again.findings.map((f) => [f.id, f.status])).toEqual(failed.findings.map((f) => [f.id, f.status]));
    await again.commit();
    expect(await windows.takeDue(10_000, 10)).not.toContain(key);
  });
});
