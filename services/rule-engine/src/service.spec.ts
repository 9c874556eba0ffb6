import { compileRuleSet, type RunWindow } from '@neatroots/checks';
import { makeTopics } from '@neatroots/messages';
import { MemoryBus, MemoryWindowStore } from '@neatroots/platform';
import type { LogFields } from '@neatroots/ports';
import type { Envelope } from '@neatroots/spans';
import { startRuleEngine } from './service';

/** The run windows, unavailable while `down` is set. */
class FlakyWindows extends MemoryWindowStore<RunWindow> {
  down = true;
  override async load(keys: readonly string[]): Promise<Map<string, RunWindow>> {
    if (this.down) throw new Error('window store down');
    return super.load(keys);
  }
}

describe('rule-engine service logs', () => {
  it('a failed batch is logged with its project and run, and delivered again', async () => {
    // the bus's own line about the retry says nothing of the run: not asserted, kept quiet
    const bus = new MemoryBus({ partitions: 1, retryDelayMs: 5, onError: () => undefined });
    const windows = new FlakyWindows();
    const topics = makeTopics('t');
    const logged: { msg: string; err?: unknown; fields?: LogFields }[] = [];
    const engine = await startRuleEngine({
      bus, windows, topics, rules: () => compileRuleSet([], () => ({ test: () => false })),
      log: (msg, err, fields) => logged.push({ msg, err, fields }),
    });
    const span = (id: string): Envelope => ({ project: 'p', received_ms: 1, item: { kind: 'span', span: { run_id: 'r1', span_id: id, type: 'llm', name: 'x', status: 'ok' } } });
    await bus.publish(topics.events, [{ key: 'r1', value: span('s1') }, { key: 'r1', value: span('s2') }]);
    for (let i = 0; i < 200 && !logged.length; i++) await new Promise((r) => setTimeout(r, 5));
    windows.down = false;
    await bus.idle();
    await engine.close();
    await bus.close();
    expect(logged[0]).toEqual({ msg: 'a batch of 2 events failed', err: expect.objectContaining({ message: 'window store down' }), fields: { project: 'p', run_id: 'r1' } });
    expect(engine.metrics.consumed).toBe(2);
  });
});
