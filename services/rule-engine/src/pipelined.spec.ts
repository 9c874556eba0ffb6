import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { compileRuleSet, parseCheck, type RunWindow } from '@neatroots/checks';
import { dropTable, droppedTableRules } from '../../../libs/checks/src/engine/dropped-table.test';
import { makeTopics } from '@neatroots/messages';
import { JournalWindowStore, LogBus, MemoryBus, MemoryWindowStore, within } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { startRuleEngine } from './service';

/**
 * Run windows applied at call (as the embedded stores are) whose saves reach the journal on
 * disk only while `landing` allows: the first `landing` saves land, the later ones are held
 * (a slow fsync, and at the "crash" one that never happened).
 */
class HeldJournal extends MemoryWindowStore<RunWindow> {
  landing = 1;
  saves = 0;
  private gate: () => void = () => undefined;
  private opened: Promise<void> = new Promise<void>((r) => (this.gate = r));
  constructor(readonly disk: JournalWindowStore<RunWindow>) {
    super();
  }
  override async save(entries: readonly { key: string; window: RunWindow; ttlMs?: number; expectRev?: number }[]): Promise<void> {
    await super.save(entries);
    if (++this.saves > this.landing) await this.opened;
    // Forwarded without the compare-and-set: this store already made it.
    await this.disk.save(entries.map(({ key, window, ttlMs }) => ({ key, window, ttlMs })));
  }
  /** Lets every held save land (only to stop the test cleanly). */
  open(): void {
    this.gate();
  }
}

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-pipelined-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function waitFor(cond: () => boolean, what: () => string, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const topics = makeTopics('t');
const rules = droppedTableRules();
const drop = dropTable;
/** The rule engine's saved position on the events topic (offsets.json: what a restart continues from). */
const savedPosition = (busDir: string): number => {
  const file = path.join(busDir, 'offsets.json');
  if (!fs.existsSync(file)) return 0;
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { groups: Record<string, Record<string, number[]>> }).groups[topics.events.name]?.['rule-engine']?.[0] ?? 0;
};

/** The rule engine's saved position, or undefined while its group is not saved yet. */
const savedPositionOrUndefined = (busDir: string): number | undefined => {
  const file = path.join(busDir, 'offsets.json');
  if (!fs.existsSync(file)) return undefined;
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { groups: Record<string, Record<string, number[]>> }).groups[topics.events.name]?.['rule-engine']?.[0];
};

describe('rule-engine on the embedded log and journal: the next batch goes on while a save syncs', () => {
  it('publishes the next batch\'s findings while the last save is held, keeps the position before it, and a restart from disk raises exactly the findings not yet saved', async () => {
    const busDir = tmp();
    const winDir = tmp();
    const bus = new LogBus({ dir: busDir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const windows = new HeldJournal(JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' }));
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 60_000 });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.id);
    });

    // Batch 1: one drop in r1 and one in r2 (no finding yet); its save lands.
    await bus.publish(topics.events, [drop('r1', 'a1'), drop('r2', 'b1')]);
    await waitFor(() => savedPosition(busDir) === 2, () => `position ${savedPosition(busDir)}, want 2`);
    // Batch 2: r1's second drop (a finding); its save is held.
    await bus.publish(topics.events, [drop('r1', 'a2')]);
    await waitFor(() => found.length === 1, () => `${found.length} findings`);
    // Batch 3 is evaluated and its finding published while batch 2's save is still held.
    await bus.publish(topics.events, [drop('r2', 'b2'), drop('r3', 'c1')]);
    await waitFor(() => found.length === 2, () => `${found.length} findings, batch 3 waited for batch 2's save`);
    await new Promise((r) => setTimeout(r, 50));
    // Neither held batch is past the saved position.
    expect(savedPosition(busDir)).toBe(2);
    expect(windows.saves).toBe(3);

    // A crash now: what is on disk is copied (the held saves never landed), then this process's
    // copy is let go.
    const busAfter = tmp();
    const winAfter = tmp();
    fs.cpSync(busDir, busAfter, { recursive: true });
    fs.cpSync(winDir, winAfter, { recursive: true });
    const before = [...found];
    windows.open();
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.disk.close();

    const bus2 = new LogBus({ dir: busAfter, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const replayed: string[] = [];
    const sub2 = await bus2.subscribe(topics.findings, { group: 'after-restart', fromBeginning: false }, async (b) => {
      for (const r of b.records) replayed.push(r.value.id);
    });
    const windows2 = JournalWindowStore.open<RunWindow>({ dir: winAfter, name: 'runs' });
    const engine2 = await startRuleEngine({ bus: bus2, windows: windows2, topics, rules: () => rules, tickMs: 60_000 });
    await bus2.idle();
    // the position saved (a timer, then a synced file) and the findings delivered: a loaded disk may take a while
    await waitFor(() => savedPosition(busAfter) === 5 && replayed.length >= before.length, () => `position ${savedPosition(busAfter)}, ${replayed.length} of ${before.length} findings`);
    // Batches 2 and 3 again against batch 1's windows: the same findings, each once.
    expect(replayed.sort()).toEqual(before.sort());
    expect(savedPosition(busAfter)).toBe(5);
    await engine2.close();
    await sub2.close();
    await bus2.close();
    await windows2.close();
  });
  it('with checkpoints (windowCheckpointMs), publishes findings at once, moves the position only at a checkpoint, and a crash before it raises the same findings again', async () => {
    const busDir = tmp();
    const winDir = tmp();
    const bus = new LogBus({ dir: busDir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const windows = JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' });
    // An interval no test waits for: the checkpoint is the test's call.
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 60_000, windowCheckpointMs: 3_600_000 });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.id);
    });
    await bus.publish(topics.events, [drop('r1', 'a1'), drop('r2', 'b1')]);
    await bus.publish(topics.events, [drop('r1', 'a2')]);
    await waitFor(() => found.length === 1, () => `${found.length} findings: the finding waited for a checkpoint`);
    await new Promise((r) => setTimeout(r, 50));
    expect(savedPosition(busDir)).toBe(0);
    expect(windows.stats.checkpoints.written).toBe(0);

    // A crash now: the batches are delivered again against no windows, the same finding once.
    const busAfter = tmp();
    const winAfter = tmp();
    fs.cpSync(busDir, busAfter, { recursive: true });
    fs.cpSync(winDir, winAfter, { recursive: true });
    const bus2 = new LogBus({ dir: busAfter, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const replayed: string[] = [];
    const sub2 = await bus2.subscribe(topics.findings, { group: 'after-restart', fromBeginning: false }, async (b) => {
      for (const r of b.records) replayed.push(r.value.id);
    });
    const windows2 = JournalWindowStore.open<RunWindow>({ dir: winAfter, name: 'runs' });
    const engine2 = await startRuleEngine({ bus: bus2, windows: windows2, topics, rules: () => rules, tickMs: 60_000, windowCheckpointMs: 5 });
    await waitFor(() => savedPosition(busAfter) === 3 && replayed.length >= 1, () => `position ${savedPosition(busAfter)}, ${replayed.length} findings`);
    expect(replayed).toEqual(found);
    await engine2.close();
    await sub2.close();
    await bus2.close();
    await windows2.close();

    // The checkpoint: both runs' windows written once, and the position moves past both batches.
    windows.checkpoint();
    await waitFor(() => savedPosition(busDir) === 3, () => `position ${savedPosition(busDir)}, want 3`);
    expect(windows.stats.checkpoints).toMatchObject({ written: 1, windows: 2, busy: 0 });
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.close();
  });
  it('with checkpoints, on a bus that cannot hold its position for the saves (in memory), a batch has its saves written at once', async () => {
    const bus = new MemoryBus();
    const windows = JournalWindowStore.open<RunWindow>({ dir: tmp(), name: 'runs' });
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 60_000, windowCheckpointMs: 3_600_000 });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.id);
    });
    // a batch waits for its saves before the next is delivered: an hour, were they left for the interval
    await bus.publish(topics.events, [drop('r1', 'a1')]);
    await waitFor(() => engine.metrics.batches === 1, () => `${engine.metrics.batches} batches done: the batch waited for the checkpoint's interval`);
    await bus.publish(topics.events, [drop('r1', 'a2')]);
    await waitFor(() => found.length === 1 && engine.metrics.batches === 2, () => `${found.length} findings, ${engine.metrics.batches} batches done`);
    expect(windows.stats.checkpoints.written).toBe(2);
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.close();
  });
  it("with checkpoints, a tick does not hold the next one (other runs' waits) while its saves wait for the checkpoint", async () => {
    const bus = new LogBus({ dir: tmp(), partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const windows = JournalWindowStore.open<RunWindow>({ dir: tmp(), name: 'runs' });
    const waits = compileRuleSet(
      [parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user')],
      () => ({ test: () => false }),
    );
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => waits, tickMs: 5, windowCheckpointMs: 3_600_000 });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.run_id);
    });
    const refund = (run: string): { key: string; value: Envelope } => ({
      key: run,
      value: { project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: run, span_id: `${run}-s1`, type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } },
    });
    await bus.publish(topics.events, [refund('r1')]);
    await waitFor(() => found.includes('r1'), () => `found ${found.join(', ')}`);
    // r1's tick saved its window, not journaled until the checkpoint; r2's wait fires in the next tick
    await bus.publish(topics.events, [refund('r2')]);
    await waitFor(() => found.includes('r2'), () => `found ${found.join(', ')}: the tick waited for the last one's saves`);
    // the saves in flight written, so the bus's close need not wait for the interval
    windows.checkpoint();
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.close();
  });
  it("with checkpoints, a stop ends though a tick failed on a run (a quiet-check lookup against a database that is down) and left it unsaved; the run's batch comes again at the next start", async () => {
    const busDir = tmp();
    const winDir = tmp();
    const waits = compileRuleSet(
      [parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user')],
      () => ({ test: () => false }),
    );
    const refund: { key: string; value: Envelope } = {
      key: 'r1',
      value: { project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: 'r1', span_id: 'r1-s1', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } },
    };
    let bus = new LogBus({ dir: busDir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    let windows = JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' });
    const logged: string[] = [];
    // Only a tick raises here (the wait fires 250 ms after the refund), and its finding's quiet lookup fails.
    const down = () => {
      throw new Error('database down (test)');
    };
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => waits, quiet: down, tickMs: 5, windowCheckpointMs: 3_600_000, log: (m) => logged.push(m) });
    await waitFor(() => savedPositionOrUndefined(busDir) !== undefined, () => 'the group is not saved');
    await bus.publish(topics.events, [refund]);
    await waitFor(() => engine.metrics.errors > 0, () => 'no tick failed');
    // The refund's batch saved r1, waiting for a checkpoint; the failed tick left r1 changed: busy.
    windows.checkpoint();
    await new Promise((r) => setTimeout(r, 50));
    expect(windows.stats.checkpoints.busy).toBe(1);
    expect(savedPosition(busDir)).toBe(0);

    await within(engine.close(), 5_000, "the rule engine's close");
    expect(logged).toContain('1 windows left unsaved by a failed step are not journaled at the stop: their batches come again at the next start');
    await within(bus.close(), 3_000, 'bus.close()');
    await within(windows.close(), 3_000, 'windows.close()');
    expect(savedPosition(busDir)).toBe(0);

    // The database is back: the next start does the run's batch again and raises its finding.
    bus = new LogBus({ dir: busDir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    windows = JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test', fromBeginning: true }, async (b) => {
      for (const r of b.records) found.push(`${r.value.run_id} ${r.value.check_id}`);
    });
    const again = await startRuleEngine({ bus, windows, topics, rules: () => waits, tickMs: 5, windowCheckpointMs: 5 });
    await waitFor(() => found.length > 0 && savedPosition(busDir) === 1, () => `found ${found.join(', ')}, position ${savedPosition(busDir)}`);
    expect(found).toEqual(['r1 refund-without-lookup']);
    await again.close();
    await sub.close();
    await bus.close();
    await windows.close();
  });

  it('at a stop, a run a failed tick left unsaved gets a last tick: with the database back, its finding is published and its batch saved', async () => {
    const busDir = tmp();
    const waits = compileRuleSet(
      [parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user')],
      () => ({ test: () => false }),
    );
    const bus = new LogBus({ dir: busDir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const windows = JournalWindowStore.open<RunWindow>({ dir: tmp(), name: 'runs' });
    let down = true;
    const quiet = () => {
      if (down) throw new Error('database down (test)');
      return false;
    };
    const logged: string[] = [];
    // The timer's own retry of the unsaved run is an hour away: only the stop's last tick can take it.
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => waits, quiet, tickMs: 5, unsavedAfterMs: 3_600_000, windowCheckpointMs: 3_600_000, log: (m) => logged.push(m) });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(`${r.value.run_id} ${r.value.check_id}`);
    });
    await waitFor(() => savedPositionOrUndefined(busDir) !== undefined, () => 'the group is not saved');
    const now = Date.now();
    await bus.publish(topics.events, [{ key: 'r1', value: { project: 'p', received_ms: now, item: { kind: 'span', span: { run_id: 'r1', span_id: 'r1-s1', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', start_ms: now, end_ms: now } } } }]);
    await waitFor(() => engine.metrics.errors > 0, () => 'no tick failed');
    await new Promise((r) => setTimeout(r, 50));
    expect(found).toEqual([]);

    down = false;
    const closing = engine.close();
    await waitFor(() => found.length > 0, () => 'the last tick published nothing');
    expect(found).toEqual(['r1 refund-without-lookup']);
    windows.checkpoint();
    await within(closing, 5_000, "the rule engine's close");
    await sub.close();
    await bus.close();
    await windows.close();
    expect(savedPosition(busDir)).toBe(1);
    expect(logged.filter((m) => m.includes('not journaled at the stop'))).toEqual([]);
  });

  it("lets a batch of a run go on while the tick that fired the run's wait is still saving", async () => {
    const bus = new LogBus({ dir: tmp(), partitions: 1, commitIntervalMs: 5, onError: () => undefined });
    const windows = new HeldJournal(JournalWindowStore.open<RunWindow>({ dir: tmp(), name: 'runs' }));
    const withWait = compileRuleSet(
      [
        parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user'),
        parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 1 } }, 'mine.yaml', 'user'),
      ],
      () => ({ test: () => false }),
    );
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => withWait, tickMs: 5 });
    const found: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.check_id);
    });
    const tool = (id: string, name: string): { key: string; value: Envelope } => ({
      key: 'r1',
      value: { project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: 'r1', span_id: id, type: 'tool', name, tool: name, status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } },
    });
    // The refund's save lands; the tick that fires its wait 250 ms later saves r1 again: held.
    await bus.publish(topics.events, [tool('s1', 'issue_refund')]);
    await waitFor(() => found.includes('refund-without-lookup'), () => `found ${found.join(', ')}`);
    await waitFor(() => windows.saves === 2, () => `${windows.saves} saves`);
    // A batch of the same run: its finding comes while the tick's save is held.
    await bus.publish(topics.events, [tool('s2', 'drop_table')]);
    await waitFor(() => found.includes('dropped-table'), () => `found ${found.join(', ')}: the batch waited for the tick's save`);
    windows.open();
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.disk.close();
  });
});
