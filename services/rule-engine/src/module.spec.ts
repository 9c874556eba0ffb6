import { compileRuleSet, parseCheckFile, type QuestionCheck } from '@neatroots/checks';
import { makeTopics } from '@neatroots/messages';
import { createMetrics, MemoryBus, MemoryWindowStore, silentLogger } from '@neatroots/platform';
import type { Platform, WindowStore } from '@neatroots/ports';
import { LOCAL_LLM_POLICY, questionKey, questionWindowKey, type AgreementRecord } from '@neatroots/questions';
import type { Envelope } from '@neatroots/spans';
import { ruleEngineModule, spanPolicy, type RuleEngineConfig } from './module';

function q(id: string): QuestionCheck {
  return parseCheckFile(`id: ${id}\nkind: yes_no\nscope: span\nask: Is ${id} wrong?\n`, `${id}.yaml`, 'user').checks[0] as QuestionCheck;
}

describe("the rule engine's span policy", () => {
  it('asks every span when the decision model answers, and caps every question when the local LLM stands in with nothing recorded', () => {
    expect(spanPolicy(false, undefined, () => undefined)).toBeUndefined();
    expect(spanPolicy(true, undefined, () => undefined)).toBe(LOCAL_LLM_POLICY);
  });

  it('lifts the cap for a question the fast classifier answers first, as the agreement store records it', async () => {
    const sure = q('sure');
    const unsure = q('unsure');
    const records: AgreementRecord[] = [
      { key: questionKey(sure), check_id: 'sure', answers: 40, agreed: 40, recent: 'a'.repeat(40) },
      { key: questionKey(unsure), check_id: 'unsure', answers: 40, agreed: 30, recent: 'a'.repeat(30) + 'd'.repeat(10) },
    ];
    const policy = spanPolicy(true, { list: async () => records }, () => undefined) as (x: QuestionCheck) => unknown;
    // The first ask reads the store in the background: until it has, the cap applies.
    expect(policy(sure)).toBe(LOCAL_LLM_POLICY);
    await new Promise((r) => setImmediate(r));
    expect(policy(sure)).toBeUndefined();
    expect(policy(unsure)).toBe(LOCAL_LLM_POLICY);
  });
});

describe('the rule engine module', () => {
  it("keeps the question scheduler's run windows for NEATROOTS_WINDOW_TTL_MS after run_end and NEATROOTS_WINDOW_IDLE_MS while quiet", async () => {
    const TTL = 60_000;
    const IDLE = 120_000;
    let now = 1_000_000;
    const bus = new MemoryBus({ partitions: 1 });
    const stores = new Map<string, MemoryWindowStore<unknown>>();
    const platform: Platform = {
      kind: 'embedded',
      bus: () => bus,
      windows: async <W>(name: string) => {
        if (!stores.has(name)) stores.set(name, new MemoryWindowStore<unknown>({ now: () => now }));
        return stores.get(name)! as unknown as WindowStore<W>;
      },
      db: async () => {
        throw new Error('no database here');
      },
      jobs: async () => {
        throw new Error('no jobs here');
      },
      ready: async () => true,
      drain: async () => bus.idle(),
      close: async () => bus.close(),
    };
    const links: Record<string, unknown> = {
      review: { isQuiet: async () => false, data: { plans: { get: async () => undefined, put: async () => undefined } } },
      checks: { rules: () => compileRuleSet([], () => ({ test: () => false })), questions: () => ({ version: 1, questions: [q('wrong')] }) },
      steering: async () => false,
      models: { localLlmStandsIn: false },
    };
    const config: RuleEngineConfig = { NEATROOTS_TOPIC_PREFIX: 't', NEATROOTS_WINDOW_TTL_MS: TTL, NEATROOTS_WINDOW_IDLE_MS: IDLE, NEATROOTS_LIVE_TRACE_GAP_MS: 1_000 };
    const running = await ruleEngineModule.start({
      config,
      log: silentLogger,
      metrics: createMetrics('t'),
      platform,
      serveGrpc: () => undefined,
      setHealth: () => undefined,
      link: async <T>(name: string) => links[name] as T,
    });
    try {
      const topics = makeTopics('t');
      const at = Date.now();
      const span = (run: string): Envelope => ({ project: 'p', received_ms: at, item: { kind: 'span', span: { run_id: run, span_id: `${run}-s1`, type: 'tool', name: 'lookup', tool: 'lookup', status: 'ok', start_ms: at, end_ms: at } } });
      await bus.publish(topics.events, [
        { key: 'ended', value: span('ended') },
        { key: 'ended', value: { project: 'p', received_ms: at, item: { kind: 'run_end', run: { event: 'run_end', run_id: 'ended', status: 'ok', final_output: 'done', ts_ms: at } } } },
        { key: 'quiet', value: span('quiet') },
      ]);
      await bus.idle();
      const scheduler = stores.get(':qs')!;
      const held = async () => [...(await scheduler.load([questionWindowKey('p', 'ended'), questionWindowKey('p', 'quiet')])).keys()];
      expect(await held()).toEqual([questionWindowKey('p', 'ended'), questionWindowKey('p', 'quiet')]);
      now += TTL + 1; // the ended run's window is gone, the quiet one's kept
      expect(await held()).toEqual([questionWindowKey('p', 'quiet')]);
      now += IDLE; // and the quiet run's too (long before the defaults of 10 minutes and 6 hours)
      expect(await held()).toEqual([]);
    } finally {
      await running.stop();
      await bus.close();
    }
  });
});
