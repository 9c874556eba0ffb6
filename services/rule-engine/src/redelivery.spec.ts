import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { compileRuleSet, parseCheck, type RunWindow } from '@neatroots/checks';
import { makeTopics, type FindingMessage } from '@neatroots/messages';
import { JournalWindowStore, LogBus } from '@neatroots/platform';
import type { BusRecord, Topic } from '@neatroots/ports';
import type { Envelope } from '@neatroots/spans';
import { startRuleEngine } from './service';

/**
 * The embedded default (the durable log and the window journal) when publishing a step's
 * findings fails: the bus delivers the batch again, or the tick's wake comes round again, and the
 * finding must then be published, with the id it had, not lost because the failed step had
 * already marked its spans seen in the windows the store holds.
 */

const topics = makeTopics('t');
const said = (f: FindingMessage) => `${f.check_id} ${f.status} ${f.id}`;

/** The embedded log, whose next `failing` publishes to the findings topic fail. */
class FlakyLogBus extends LogBus {
  failing = 1;
  /** What the failed publishes carried (check, status and id of each finding). */
  refused: string[] = [];
  override publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (topic.name === topics.findings.name && this.failing > 0) {
      this.failing--;
      for (const r of records as unknown as BusRecord<FindingMessage>[]) this.refused.push(said(r.value));
      return Promise.reject(new Error('findings topic unavailable'));
    }
    return super.publish(topic, records);
  }
}

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-redelivery-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

async function waitFor(cond: () => boolean, what: () => string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const rules = compileRuleSet(
  [
    parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 2 } }, 'mine.yaml', 'user'),
    parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user'),
  ],
  () => ({ test: () => false }),
);
const tool = (id: string, name: string): BusRecord<Envelope> => ({
  key: 'r1',
  value: { project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: 'r1', span_id: id, type: 'tool', name, tool: name, status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } },
});

async function embedded(opts: { attempts?: number; unsavedAfterMs?: number } = {}) {
  const bus = new FlakyLogBus({ dir: tmp(), partitions: 1, commitIntervalMs: 5, retryDelayMs: 5, setAside: { attempts: opts.attempts }, onError: () => undefined });
  const windows = JournalWindowStore.open<RunWindow>({ dir: tmp(), name: 'runs' });
  const logged: string[] = [];
  const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 5, unsavedAfterMs: opts.unsavedAfterMs, log: (m) => logged.push(m) });
  const found: string[] = [];
  const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
    for (const r of b.records) found.push(said(r.value));
  });
  const stop = async () => {
    await engine.close();
    await sub.close();
    await bus.close();
    await windows.close();
  };
  return { bus, found, logged, stop };
}

describe('rule-engine on the embedded default: a finding whose publish failed', () => {
  it('is published, same id, when the bus delivers its batch again', async () => {
    const e = await embedded();
    try {
      // the run's first drop is saved (its window is in the store); its second raises the finding
      await e.bus.publish(topics.events, [tool('s1', 'drop_table')]);
      await e.bus.idle();
      await e.bus.publish(topics.events, [tool('s2', 'drop_table')]);
      await waitFor(() => e.logged.length > 0 && e.bus.failing === 0, () => 'the failed batch', 5_000);
      await waitFor(() => e.found.length > 0, () => `no finding after the redelivery (logged: ${e.logged.join('; ')})`, 5_000);
      await e.bus.idle();
      expect(e.logged[0]).toBe('a batch of 1 events failed');
      expect(e.bus.refused).toEqual([expect.stringMatching(/^dropped-table raised [0-9a-f]+$/)]);
      expect(e.found).toEqual(e.bus.refused);
      // the next span of the run is a new one; the one published is not raised again
      await e.bus.publish(topics.events, [tool('s3', 'lookup_order')]);
      await e.bus.idle();
      expect(e.found).toHaveLength(1);
    } finally {
      await e.stop();
    }
  });

  it('is published, same id, by the timer when its batch is set aside and the run says nothing more', async () => {
    const e = await embedded({ attempts: 1, unsavedAfterMs: 200 });
    try {
      await e.bus.publish(topics.events, [tool('s1', 'drop_table')]);
      await e.bus.idle();
      // every try of the batch, then of its record alone, fails to publish the finding: the record is set aside
      e.bus.failing = Number.MAX_SAFE_INTEGER;
      await e.bus.publish(topics.events, [tool('s2', 'drop_table')]);
      await waitFor(() => e.bus.setAsideCount > 0, () => `the record set aside (logged: ${e.logged.join('; ')})`, 5_000);
      e.bus.failing = 0;
      expect(e.found).toEqual([]);
      await waitFor(() => e.found.length > 0, () => `no finding from the timer (logged: ${e.logged.join('; ')})`, 5_000);
      expect(e.bus.refused.length).toBeGreaterThanOrEqual(1);
      expect(new Set(e.bus.refused)).toEqual(new Set([expect.stringMatching(/^dropped-table raised [0-9a-f]+$/)]));
      expect(e.found).toEqual([e.bus.refused[0]]);
      // published once: the next ticks find nothing left
      await new Promise((r) => setTimeout(r, 300));
      expect(e.found).toHaveLength(1);
    } finally {
      await e.stop();
    }
  });

  it('is published, same id, when the wake of a requires_before wait comes round again (its lease run out)', async () => {
    const e = await embedded();
    try {
      await e.bus.publish(topics.events, [tool('s1', 'issue_refund')]);
      // 250 ms later a tick fires the wait; its publish fails; the wake is leased for 5 s
      await waitFor(() => e.logged.includes('tick failed (will retry)'), () => `logged: ${e.logged.join('; ')}`, 5_000);
      expect(e.found).toEqual([]);
      await waitFor(() => e.found.length > 0, () => `no finding after the lease (logged: ${e.logged.join('; ')})`, 8_000);
      expect(e.bus.refused).toEqual([expect.stringMatching(/^refund-without-lookup raised [0-9a-f]+$/)]);
      expect(e.found).toEqual(e.bus.refused);
    } finally {
      await e.stop();
    }
  }, 15_000);
});
