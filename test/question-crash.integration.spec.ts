import * as fs from 'node:fs';
import * as path from 'node:path';
import { normalizeItem, type StreamItem } from '@neatroots/spans';
import { openPglite, openPostgres, requireService, until } from '@neatroots/platform';
import { judgeReply, parseJudgePrompt, startFakeOpenAI, type FakeOpenAI } from '../libs/platform/src/models/fake-openai.test';
import { Cluster } from './distributed/cluster';
import { send } from './distributed/fleet';
import { EmbeddedProc } from './embedded/support';

/**
 * The process that asks the model killed with SIGKILL in the middle of a batch: the model has
 * answered some of its questions and is still working on others, so nothing of the batch is
 * published or marked done. Started again, it reads the batch again (at least once) and takes
 * the answers it had from the deployment's shared cache: the model is asked only what it had
 * not answered, and the findings are stored once each. Distributed: the question service its
 * own process on the real Kafka, Redis (the cache) and Postgres. Embedded: `neatroots start`
 * on its data folder, the cache in its database. The decision model is a local
 * OpenAI-compatible server in both.
 */
const CLAIM = 'Did the agent tell the customer a refund went through without issuing it?';
const RUDE = 'Was the agent rude to the customer?';
const RUNS = 3;

/** A counter's value on a process's /metrics (0 when absent). */
async function metric(adminPort: number, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** What the scenario needs of a deployment: where its checks go, its processes, its stored findings. */
interface Deployment {
  home: string;
  project: string;
  key: string;
  /** Starts it all; the gRPC port exports go to and the admin port of the process that asks the model. */
  start(): Promise<{ grpc: number; admin: number }>;
  killAsker(): Promise<void>;
  /** The admin port of the process started again. */
  restartAsker(): Promise<number>;
  /** How many findings of the CLAIM check are stored, while it runs. */
  claimFindings(): Promise<number>;
  /** The same, read once the deployment has stopped cleanly where its database needs it (PGlite has one writer). */
  claimFindingsStopped(): Promise<number>;
}

function runs(project: string): StreamItem[] {
  const items: StreamItem[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = Date.now() + i;
    items.push(normalizeItem({ event: 'run_start', run_id: `r${i}`, project, workflow: 'support', ts_ms: t }));
    items.push(normalizeItem({ run_id: `r${i}`, span_id: 's1', type: 'tool', tool: 'lookup_order', input: { order: i }, output: { ok: true }, start_ms: t, end_ms: t + 1 }));
    items.push(normalizeItem({ event: 'run_end', run_id: `r${i}`, status: 'ok', final_output: `Order ${i}: your refund went through.`, ts_ms: t + 2 }));
  }
  return items;
}

/** The model: answers the CLAIM questions, never the RUDE ones while `slow` (the batch is in hand when the process is killed). */
class ScriptedModel {
  fake!: FakeOpenAI;
  /** Each question the model was asked (its text and evidence), and each second look. */
  asked: string[] = [];
  looks = 0;
  slow = true;

  async start(): Promise<this> {
    this.fake = await startFakeOpenAI((call) => {
      if (call.kind === 'judge') {
        const qs = parseJudgePrompt(call);
        for (const q of qs) this.asked.push(`${q.ask}\n${q.evidence}`);
        if (this.slow && qs.some((q) => q.ask === RUDE)) return { hang: true };
        return judgeReply(call, (q) => (q.ask === CLAIM ? { p: 0.95, quote: 'your refund went through' } : { p: 0.05 }));
      }
      if (call.kind === 'second_look') {
        this.looks++;
        return { json: { holds: true, quote: 'your refund went through', reason: 'it holds' } };
      }
      // The planner picks no library questions: the run is asked the two checks below only.
      if (call.kind === 'plan') return { json: { pick: [], new: [] } };
      return { content: 'Tell the customer the refund has not been issued.' };
    });
    return this;
  }

  env(): Record<string, string> {
    return {
      NEATROOTS_DECISION_MODEL_URL: this.fake.url,
      NEATROOTS_DECISION_MODEL_NAME: 'judge-test',
      // One question a request: the CLAIM questions are answered while the RUDE ones hang.
      NEATROOTS_QUESTION_BATCH: '1',
    };
  }
}

async function crashMidBatch(model: ScriptedModel, d: Deployment): Promise<void> {
  fs.mkdirSync(path.join(d.home, 'checks'), { recursive: true });
  fs.writeFileSync(path.join(d.home, 'checks', 'claims.yaml'), `id: false-refund-claim\nkind: yes_no\nscope: trace\nwhen: end\nask: ${CLAIM}\nevidence: { final_output: true }\naction: flag\n`);
  fs.writeFileSync(path.join(d.home, 'checks', 'tone.yaml'), `id: rude\nkind: yes_no\nscope: trace\nwhen: end\nask: ${RUDE}\nevidence: { final_output: true }\naction: flag\n`);
  const ports = await d.start();
  await send(ports.grpc, d.key, runs(d.project), async () => undefined);

  const claims = () => model.asked.filter((a) => a.startsWith(CLAIM));
  // Every CLAIM question answered and looked at twice (the second look), every RUDE one waiting on the model.
  await until('the first answers', () => claims().length === RUNS && model.looks === RUNS && model.asked.filter((a) => a.startsWith(RUDE)).length === RUNS);
  await new Promise((r) => setTimeout(r, 500));
  const paid = model.asked.length;
  expect(await metric(ports.admin, 'neatroots_question_cache_lookups_total', 'kind="question",result="miss"')).toBe(paid);
  await d.killAsker();
  model.slow = false;

  const admin = await d.restartAsker();
  await until('the findings', async () => (await d.claimFindings()) === RUNS);
  // The answers the model gave before the crash came from the shared cache; only the RUDE questions were asked again.
  expect(await metric(admin, 'neatroots_question_cache_lookups_total', 'kind="question",result="shared"')).toBeGreaterThanOrEqual(RUNS);
  expect(await metric(admin, 'neatroots_question_cache_lookups_total', 'kind="second_look",result="shared"')).toBe(RUNS);
  expect(await metric(admin, 'neatroots_question_cache_lookups_total', 'kind="question",result="miss"')).toBe(RUNS);
  expect(model.asked).toHaveLength(paid + RUNS);
  const answered = model.asked.filter((a) => !a.startsWith(RUDE));
  expect(new Set(answered).size).toBe(answered.length);
  expect(claims()).toHaveLength(RUNS);
  expect(model.looks).toBe(RUNS);
  await new Promise((r) => setTimeout(r, 1_000));
  expect(await d.claimFindingsStopped()).toBe(RUNS);
}

const CLAIM_FINDINGS = "SELECT count(*)::int AS n FROM findings WHERE project = $1 AND check_id = 'false-refund-claim'";

describe('the question service killed mid-batch, embedded', () => {
  const model = new ScriptedModel();
  beforeAll(() => model.start());
  afterAll(() => model.fake?.close());

  it('asks the model again only what it had not answered: the answers it had are in the database', async () => {
    const project = 'qcrash';
    const app = new EmbeddedProc(project, `key-${project}`, model.env());
    const findings = async () => {
      const res = await fetch(`http://127.0.0.1:${app.ports.http}/v1/projects/${project}/findings?state=all&limit=100`, { headers: { 'x-api-key': app.key } });
      const body = (await res.json()) as { findings: { check_id: string }[] };
      return body.findings.filter((f) => f.check_id === 'false-refund-claim').length;
    };
    try {
      await crashMidBatch(model, {
        home: app.home,
        project,
        key: app.key,
        start: async () => (await app.start(), { grpc: app.ports.grpc, admin: app.ports.admin }),
        killAsker: async () => void (await app.stop('SIGKILL')),
        restartAsker: async () => (await app.start(), app.ports.admin),
        claimFindings: findings,
        claimFindingsStopped: async () => {
          expect((await app.stop('SIGTERM')).code).toBe(0);
          const db = await openPglite({ dataDir: path.join(app.home, 'data', 'pg') });
          try {
            return (await db.query<{ n: number }>(CLAIM_FINDINGS, [project])).rows[0].n;
          } finally {
            await db.close();
          }
        },
      });
    } finally {
      app.remove();
    }
  }, 240_000);
});

const SUITE = 'the question service killed mid-batch, distributed';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);

(kafka && redis && pg ? describe : describe.skip)(SUITE, () => {
  const model = new ScriptedModel();
  beforeAll(() => model.start());
  afterAll(() => model.fake?.close());

  it('asks the model again only what it had not answered: the answers it had are in Redis', async () => {
    const project = `qcrash-${Date.now().toString(36)}`;
    const key = `key-${project}`;
    const cluster = new Cluster(
      { kafka: kafka!, redis: redis!, pg: pg! },
      { NEATROOTS_API_KEYS: `${project}=${key}`, ...model.env(), NEATROOTS_KAFKA_SESSION_TIMEOUT_MS: '6000' },
    );
    await cluster.init();
    const db = await openPostgres({ url: cluster.pgUrl });
    const findings = async () => (await db.query<{ n: number }>(CLAIM_FINDINGS, [project])).rows[0].n;
    try {
      let asker: Awaited<ReturnType<Cluster['start']>>;
      await crashMidBatch(model, {
        home: cluster.home,
        project,
        key,
        start: async () => {
          await cluster.start('review');
          const [, , q] = await Promise.all([cluster.start('ingest'), cluster.start('rule-engine'), cluster.start('question')]);
          asker = q;
          return { grpc: cluster.ports.grpc, admin: q.adminPort };
        },
        killAsker: () => cluster.stop(asker, 'SIGKILL'),
        restartAsker: async () => (asker = await cluster.start('question')).adminPort,
        claimFindings: findings,
        claimFindingsStopped: findings,
      });
    } finally {
      await db.close();
      await cluster.close();
    }
  }, 240_000);
});
