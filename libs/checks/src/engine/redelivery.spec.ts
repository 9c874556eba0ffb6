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
 * A step whose findings were never published (its commit() never called) must not lose them when
 * the bus delivers its batch again, or when its wake comes round: the same findings, with the same
 * ids. The embedded stores hand out the windows they hold, and a step changes them in place: the
 * spans it applied are seen already, so its findings come with the next step on its runs.
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

  it('says which windows hold changes no commit saved (isChanging): during a step, until its commit, and after a step never committed until a later one is', async () => {
    const key = windowKey('p', 'r1');
    let during: boolean | undefined;
    const watched: RuleEngine = new RuleEngine({
      windows,
      rules: () => rules,
      quiet: async (): Promise<boolean> => {
        during = watched.isChanging(key);
        return false;
      },
    });
    expect(watched.isChanging(key)).toBe(false);
    await (await watched.process([call('s1', 'drop_table')])).commit();
    expect(watched.isChanging(key)).toBe(false);
    const step = await watched.process([call('s2', 'drop_table')]);
    // settled (quiet asked) while the step ran: its window was being changed
    expect(during).toBe(true);
    expect(watched.isChanging(key)).toBe(true);
    await step.commit();
    expect(watched.isChanging(key)).toBe(false);
    // a run_end adds no span and raises nothing here, but changes the window all the same
    const ended = await watched.process([end(2_000)]);
    expect(ended.findings).toEqual([]);
    expect(watched.isChanging(key)).toBe(true);
    expect(watched.isChanging(windowKey('p', 'other'))).toBe(false);
    // never committed (its publish failed): still holding changes until a later step on the run is committed
    await (await watched.process([call('s3', 'lookup_order', 2_100)])).commit();
    expect(watched.isChanging(key)).toBe(false);
  });

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

  it('comes with the next step on the run, same id, until a step that carried it is committed', async () => {
    await (await engine.process([call('s1', 'drop_table')])).commit();
    const failed = await engine.process([call('s2', 'drop_table')]);
    expect(failed.findings).toHaveLength(1);
    // a later step on the run (a tick, another batch) carries it, first; that one fails too
    const next = await engine.process([call('s3', 'lookup_order')]);
    expect(next.findings.map((f) => [f.id, f.status])).toEqual(failed.findings.map((f) => [f.id, f.status]));
    const after = await engine.process([call('s4', 'drop_table')]);
    expect(after.findings.map((f) => [f.id, f.status, f.count])).toEqual([[failed.findings[0].id, 'raised', 2]]);
    await after.commit();
    // published once a step carrying it is committed: neither comes again
    expect((await engine.process([call('s2', 'drop_table')])).findings).toEqual([]);
    expect((await engine.process([call('s5', 'lookup_order')])).findings).toEqual([]);
  });

  it('keeps what the step applied: a later step sees the call it made, and its batch delivered again is a duplicate', async () => {
    await (await engine.process([call('s1', 'search', 1_000, 'error')])).commit();
    // a later call of the tool succeeds, in a step never committed
    await engine.process([call('s2', 'search', 2_000)]);
    // the run ends in another step: the tool's latest call succeeded, nothing went unrecovered
    const ended = await engine.process([end(3_000)]);
    expect(ended.findings).toEqual([]);
    await ended.commit();
    expect((await engine.process([call('s2', 'search', 2_000)])).findings).toEqual([]);
  });

  it('raises the findings of a step that threw before it was done, with the batch delivered again', async () => {
    let broken = true;
    const halting = compileRuleSet([{ ...rule('no-drops', { type: 'count', span: { tool: ['drop_table'] }, at_least: 1 }), action: 'halt' }], () => ({ test: () => false }));
    const e = new RuleEngine({
      windows,
      rules: () => halting,
      steering: () => {
        if (broken) throw new Error('settings unavailable');
        return true;
      },
    });
    await (await e.process([call('s1', 'lookup_order')])).commit();
    await expect(e.process([call('s2', 'drop_table')])).rejects.toThrow('settings unavailable');
    broken = false;
    const again = await e.process([call('s2', 'drop_table')]);
    expect(again.findings.map((f) => [f.check_id, f.status, f.action, f.span_ids])).toEqual([['no-drops', 'raised', 'halt', ['s2']]]);
    expect(again.notes.map((n) => n.kind)).toEqual(['halt']);
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

describe('a step never committed, over the window journal, reopened', () => {
  it('journals the state of every check a step changed, a step not committed included: the window read back is the live one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-redelivery-'));
    dirs.push(dir);
    const open = () => JournalWindowStore.open<RunWindow>({ dir, name: 'runs', now: () => 1_000 });
    const a = open();
    const e = new RuleEngine({ windows: a, rules: () => rules, wakeLeaseMs: 100 });
    const key = windowKey('p', 'r1');
    await (await e.process([call('s1', 'drop_table')])).commit();
    await (await e.process([call('s2', 'issue_refund', 1_010)])).commit();
    await (await e.tick(5_000, { keys: [key] })).commit();
    await (await e.process([call('s3', 'search', 6_000, 'error')])).commit();
    await e.process([call('s4', 'drop_table', 6_010)]); // never committed: its count goes with the next step's save
    await (await e.process([call('s5', 'lookup_order', 6_020)])).commit();
    const live = structuredClone((await a.load([key])).get(key)!);
    // Each rule's state changed along the way (the journal must have each change).
    expect(Object.keys(live.checks).sort()).toEqual(['dropped-table', 'refund-without-lookup', 'tool-failed-quietly']);
    await a.close();
    const b = open();
    expect((await b.load([key])).get(key)).toEqual(live);
    await b.close();
  });

  it('journals the span ids it applied with the step that carried its findings: none is counted twice after a restart', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-redelivery-'));
    dirs.push(dir);
    const open = () => JournalWindowStore.open<RunWindow>({ dir, name: 'runs', now: () => 1_000 });
    const a = open();
    const e = new RuleEngine({ windows: a, rules: () => rules });
    await (await e.process([call('s1', 'drop_table')])).commit();
    await (await e.process([call('s2', 'lookup_order')])).commit();
    await e.process([call('s3', 'drop_table')]); // never committed
    await (await e.process([call('s4', 'lookup_order')])).commit();
    await a.close();
    const b = open();
    const w = (await b.load([windowKey('p', 'r1')])).get(windowKey('p', 'r1'))!;
    expect(Object.keys(w.seen).sort()).toEqual(['s1', 's2', 's3', 's4']);
    // s3 exported again after the restart: a duplicate, not a second drop
    const after = new RuleEngine({ windows: b, rules: () => rules });
    expect((await after.process([call('s3', 'drop_table')])).findings).toEqual([]);
    await b.close();
  });
});
