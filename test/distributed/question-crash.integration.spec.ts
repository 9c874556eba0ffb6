import * as fs from 'node:fs';
import * as path from 'node:path';
import { normalizeItem, type StreamItem } from '@neatroots/spans';
import { openPostgres, requireService } from '@neatroots/platform';
import { judgeReply, parseJudgePrompt, startFakeOpenAI, type FakeOpenAI } from '../../libs/platform/src/models/fake-openai.test';
import { Cluster } from './cluster';
import { send } from './fleet';

/**
 * The question service killed with SIGKILL in the middle of a batch: the model has answered
 * some of its questions and is still working on others, so nothing of the batch is published
 * or marked done. The service started again reads the batch again (at least once) and takes
 * the answers it had from what the deployment shares in Redis: the model is asked only what it
 * had not answered, and the findings are stored once each. Each service its own process on the
 * real Kafka, Redis and Postgres; the decision model a local OpenAI-compatible server.
 */
const SUITE = 'the question service after a crash, distributed';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A counter's value on a process's /metrics (0 when absent). */
async function metric(adminPort: number, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : 0;
}

const CLAIM = 'Did the agent tell the customer a refund went through without issuing it?';
const RUDE = 'Was the agent rude to the customer?';

maybe(SUITE, () => {
  let fake: FakeOpenAI;
  /** Each question the model was asked (its text and evidence), and each second look. */
  const asked: string[] = [];
  let looks = 0;
  /** While true the model never answers the RUDE questions (the batch is still in hand when the service is killed). */
  let slow = true;
  beforeAll(async () => {
    fake = await startFakeOpenAI((call) => {
      if (call.kind === 'judge') {
        const qs = parseJudgePrompt(call);
        for (const q of qs) asked.push(`${q.ask}\n${q.evidence}`);
        if (slow && qs.some((q) => q.ask === RUDE)) return { hang: true };
        return judgeReply(call, (q) => (q.ask === CLAIM ? { p: 0.95, quote: 'your refund went through' } : { p: 0.05 }));
      }
      if (call.kind === 'second_look') {
        looks++;
        return { json: { holds: true, quote: 'your refund went through', reason: 'it holds' } };
      }
      // The planner picks no library questions: the run is asked the two checks below only.
      if (call.kind === 'plan') return { json: { pick: [], new: [] } };
      return { content: 'Tell the customer the refund has not been issued.' };
    });
  });
  afterAll(() => fake?.close());

  it('asks the model again only what it had not answered when the service was killed', async () => {
    const project = `qcrash-${Date.now().toString(36)}`;
    const key = `key-${project}`;
    const cluster = new Cluster(
      { kafka: kafka!, redis: redis!, pg: pg! },
      {
        NEATROOTS_API_KEYS: `${project}=${key}`,
        NEATROOTS_DECISION_MODEL_URL: fake.url,
        NEATROOTS_DECISION_MODEL_NAME: 'judge-test',
        // One question a request: the CLAIM questions are answered while the RUDE ones hang.
        NEATROOTS_QUESTION_BATCH: '1',
        NEATROOTS_KAFKA_SESSION_TIMEOUT_MS: '6000',
      },
    );
    await cluster.init();
    try {
      fs.mkdirSync(path.join(cluster.home, 'checks'));
      fs.writeFileSync(path.join(cluster.home, 'checks', 'claims.yaml'), `id: false-refund-claim\nkind: yes_no\nscope: trace\nwhen: end\nask: ${CLAIM}\nevidence: { final_output: true }\naction: flag\n`);
      fs.writeFileSync(path.join(cluster.home, 'checks', 'tone.yaml'), `id: rude\nkind: yes_no\nscope: trace\nwhen: end\nask: ${RUDE}\nevidence: { final_output: true }\naction: flag\n`);
      await cluster.start('review');
      const [, , question] = await Promise.all([cluster.start('ingest'), cluster.start('rule-engine'), cluster.start('question')]);
      const runs = 3;
      const items: StreamItem[] = [];
      for (let i = 0; i < runs; i++) {
        const t = Date.now() + i;
        items.push(normalizeItem({ event: 'run_start', run_id: `r${i}`, project, workflow: 'support', ts_ms: t }));
        items.push(normalizeItem({ run_id: `r${i}`, span_id: 's1', type: 'tool', tool: 'lookup_order', input: { order: i }, output: { ok: true }, start_ms: t, end_ms: t + 1 }));
        items.push(normalizeItem({ event: 'run_end', run_id: `r${i}`, status: 'ok', final_output: `Order ${i}: your refund went through.`, ts_ms: t + 2 }));
      }
      await send(cluster.ports.grpc, key, items, async () => undefined);

      const claims = () => asked.filter((a) => a.startsWith(CLAIM));
      // Every CLAIM question answered and looked at twice (the second look), every RUDE one waiting on the model.
      await until('the first answers', () => claims().length === runs && looks === runs && asked.filter((a) => a.startsWith(RUDE)).length === runs);
      await new Promise((r) => setTimeout(r, 500));
      // The library's questions of each run are asked beside the two checks.
      const paid = asked.length;
      expect(await metric(question.adminPort, 'neatroots_question_cache_lookups_total', 'kind="question",result="miss"')).toBe(paid);
      await cluster.stop(question, 'SIGKILL');
      slow = false;

      const again = await cluster.start('question');
      const db = await openPostgres({ url: cluster.pgUrl });
      const stored = async () => (await db.query<{ id: string }>("SELECT id FROM findings WHERE project = $1 AND check_id = 'false-refund-claim'", [project])).rows;
      try {
        await until('the findings', async () => (await stored()).length === runs);
        // The answers the model gave before the crash came from Redis; only the RUDE questions were asked again.
        expect(await metric(again.adminPort, 'neatroots_question_cache_lookups_total', 'kind="question",result="shared"')).toBeGreaterThanOrEqual(runs);
        expect(await metric(again.adminPort, 'neatroots_question_cache_lookups_total', 'kind="second_look",result="shared"')).toBe(runs);
        expect(await metric(again.adminPort, 'neatroots_question_cache_lookups_total', 'kind="question",result="miss"')).toBe(runs);
        expect(asked).toHaveLength(paid + runs);
        const answered = asked.filter((a) => !a.startsWith(RUDE));
        expect(new Set(answered).size).toBe(answered.length);
        expect(claims()).toHaveLength(runs);
        expect(looks).toBe(runs);
        await new Promise((r) => setTimeout(r, 1_000));
        expect(await stored()).toHaveLength(runs);
      } finally {
        await db.close();
      }
    } finally {
      await cluster.close();
    }
  }, 240_000);
});
