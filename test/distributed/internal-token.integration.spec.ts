import * as fs from 'node:fs';
import * as path from 'node:path';
import { credentials, Metadata, status as Status } from '@grpc/grpc-js';
import { openPostgres, requireService, until } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { v1 } from '@neatroots/proto';
import { normalizeItem } from '@neatroots/spans';
import { Cluster, type ServiceProc } from './cluster';
import { send } from './fleet';

/**
 * A NEATROOTS_INTERNAL_TOKEN that differs between the services: review (the cluster's token)
 * refuses the calls of an ingest and an api given another. They must say so rather than look
 * healthy and fail every call: /readyz 503 naming the variable (so a rollout with the wrong
 * token stops there), an export refused with a message that says the token does not match (not
 * that none was carried), ingest's log saying it once, and the api answering 503 naming the
 * misconfiguration instead of 500 "internal error".
 */
const SUITE = 'distributed: a wrong NEATROOTS_INTERNAL_TOKEN';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `tok-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;
const WRONG_TOKEN = 'not-the-deployment-internal-token';

/** A cluster whose processes given a wrong token (the targets in `wrong`) are waited for until their admin port answers, not until ready. */
class Misconfigured extends Cluster {
  constructor(
    services: ConstructorParameters<typeof Cluster>[0],
    env: Record<string, string>,
    readonly wrong: Set<string>,
  ) {
    super(services, env);
  }

  override async ready(sp: ServiceProc, timeoutMs = 60_000): Promise<void> {
    if (!this.wrong.has(sp.target)) return super.ready(sp, timeoutMs);
    await until(`${sp.target}'s admin port`, async () => {
      if (sp.proc.exitCode !== null) throw new Error(`${sp.target} exited ${sp.proc.exitCode}:\n${sp.output.join('')}`);
      return fetch(`http://127.0.0.1:${sp.adminPort}/healthz`).then((r) => r.ok, () => false);
    }, timeoutMs);
  }
}

/** /readyz, once it answers with an error (the first answers may come before the services said they serve). */
async function notReady(sp: ServiceProc): Promise<{ status: number; body: { status: string; error: string } }> {
  return until(`${sp.target}'s /readyz to name its error`, async () => {
    const res = await fetch(`http://127.0.0.1:${sp.adminPort}/readyz`);
    const body = (await res.json()) as { status: string; error?: string };
    return body.error !== undefined || res.ok ? { status: res.status, body: body as { status: string; error: string } } : undefined;
  }, 60_000);
}

maybe(SUITE, () => {
  let cluster: Misconfigured;
  let ingest: ServiceProc;
  let api: ServiceProc;

  beforeAll(async () => {
    cluster = new Misconfigured({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }, new Set(['ingest', 'api']));
    await cluster.init();
    await cluster.start('review');
    [ingest, api] = await Promise.all([cluster.start('ingest', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN }), cluster.start('api', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN })]);
  }, 180_000);

  afterAll(async () => {
    await cluster?.close();
  }, 120_000);

  it('ingest and the api are not ready: /readyz 503 naming NEATROOTS_INTERNAL_TOKEN and that the token does not match', async () => {
    for (const sp of [ingest, api]) {
      const ready = await notReady(sp);
      expect([sp.target, ready.status, ready.body.status]).toEqual([sp.target, 503, 'not ready']);
      expect(ready.body.error).toMatch(/^Error: the review service \(127\.0\.0\.1:\d+\) refuses this process's calls: .*does not match this service's NEATROOTS_INTERNAL_TOKEN/);
      expect(ready.body.error).not.toContain(WRONG_TOKEN);
      expect(ready.body.error).not.toContain(cluster.env.NEATROOTS_INTERNAL_TOKEN);
    }
  });

  it('an export is refused UNAVAILABLE saying the token does not match, and ingest logs it once for repeated exports', async () => {
    const client = new v1.IngestClient(`127.0.0.1:${cluster.ports.grpc}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    const exportOnce = () =>
      new Promise<{ code: number; details: string } | null>((resolve) =>
        // The key is checked before the message is read: what it holds does not matter.
        client.export({ events: [], note_runs: [] }, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)),
      );
    try {
      const errors = [await exportOnce(), await exportOnce(), await exportOnce()];
      for (const err of errors) {
        expect(err?.code).toBe(Status.UNAVAILABLE);
        expect(err?.details).toMatch(/^cannot check the API key right now \(the review service refuses this process's calls, a misconfiguration: .*carried an internal token \(x-neatroots-internal-token\) that does not match this service's NEATROOTS_INTERNAL_TOKEN/);
        expect(err?.details).not.toContain(WRONG_TOKEN);
      }
    } finally {
      client.close();
    }
    // Stopped, and its output read to the end: one line for the three refusals.
    const closed = new Promise((r) => ingest.proc.once('close', r));
    await cluster.stop(ingest);
    await closed;
    const lines = ingest.output.join('').split('\n').filter((l) => l.includes('cannot check API keys'));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]) as { level: string; service: string; msg: string };
    expect([line.level, line.service]).toEqual(['error', 'ingest']);
    expect(line.msg).toMatch(/does not match this service's NEATROOTS_INTERNAL_TOKEN/);
  });

  it('the api answers 503 naming the misconfiguration, with Retry-After, not 500 internal', async () => {
    for (const key of [KEY, 'a-key-nobody-has']) {
      const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/runs`, { headers: { 'x-api-key': key } });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect([res.status, body.error.code, res.headers.get('retry-after')]).toEqual([503, 'unavailable', '5']);
      expect(body.error.message).toMatch(/^the review service refuses this process's calls, a misconfiguration: .*does not match this service's NEATROOTS_INTERNAL_TOKEN/);
    }
  });
});

/**
 * The rule engine and the question service given another NEATROOTS_INTERNAL_TOKEN than review's:
 * every record that needs review (the question scheduler reads a run's plan there, a raised
 * finding asks whether its check is quiet, an answer is recorded there) fails alike until the
 * token is fixed. That is an outage, not a bad
 * record: neither service may set the records aside as dead letters, it reads them again until
 * review takes its calls, and both are not ready meanwhile. Started again with the deployment's
 * token, each takes up where it stopped: the finding and the answer are stored, no dead letter.
 * Meanwhile the api (its token right) answers what it asks the question service for (model
 * agreement, a draft) 503 naming the mismatch, not 500.
 */
const OUTAGE = 'distributed: a rule engine and a question service with a wrong NEATROOTS_INTERNAL_TOKEN';
const maybeOutage = kafka && redis && pg ? describe : describe.skip;

maybeOutage(OUTAGE, () => {
  const project = `tokq-${Date.now().toString(36)}`;
  const key = `key-${project}`;
  const RULE_ID = 'refund-without-lookup';
  const QUESTION_ID = 'wrong-refund';
  let cluster: Misconfigured;
  let engine: ServiceProc;
  let question: ServiceProc;
  let db: Db;
  const runId = `run-${project}`;

  beforeAll(async () => {
    cluster = new Misconfigured({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${project}=${key}` }, new Set(['rule-engine', 'question']));
    await cluster.init();
    fs.mkdirSync(path.join(cluster.home, 'checks'));
    fs.writeFileSync(
      path.join(cluster.home, 'checks', 'refunds.yaml'),
      `id: ${RULE_ID}\nkind: rule\ntitle: Refund without lookup\nrule: { type: requires_before, call: { tool: issue_refund }, requires: { tool: lookup_order } }\nguidance: Call {requires} first.\n`,
    );
    // A question the fast classifier answers (no model is configured): its answer is recorded in review.
    fs.writeFileSync(path.join(cluster.home, 'checks', 'question.yaml'), `id: ${QUESTION_ID}\nkind: yes_no\nscope: span\nwhen: live\nask: Was this refund the wrong one?\n`);
    await cluster.start('review');
    [, , engine, question] = await Promise.all([
      cluster.start('ingest'),
      cluster.start('api'),
      cluster.start('rule-engine', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN }),
      cluster.start('question', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN }),
    ]);
    db = await openPostgres({ url: cluster.pgUrl });
  }, 180_000);

  afterAll(async () => {
    await db?.close();
    await cluster?.close();
  }, 120_000);

  const deadLetters = async () => (await db.query<{ source: string; reason: string }>('SELECT source, reason FROM dead_letters')).rows;
  /** A log line of `sp` saying a batch of `topic` failed for the token (the bus's, not the checks poll's). */
  const refusedBatch = (sp: ServiceProc, topic: string) =>
    sp.output
      .join('')
      .split('\n')
      .find((l) => l.includes(`${cluster.prefix}.${topic}`) && l.includes("does not match this service's NEATROOTS_INTERNAL_TOKEN"));
  /** Failed tries of `sp`'s bus consumers so far (each try of a batch the guard makes, each batch read again). */
  const kafkaErrors = async (sp: ServiceProc) => {
    const text = await (await fetch(`http://127.0.0.1:${sp.adminPort}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('neatroots_dependency_errors_total{') && l.includes('dependency="kafka"'));
    if (!line) throw new Error(`no count of kafka errors in ${sp.target}'s metrics:\n${text.split('\n').filter((l) => l.includes('dependency_errors')).join('\n')}`);
    return Number(line.split(' ').pop());
  };
  /**
   * Waits until `sp` failed a batch of `topic` for the token, and then either set something
   * aside (which review stores) or went on trying well past the tries a bad record gets before it
   * is set aside (NEATROOTS_BUS_ATTEMPTS, 3, for the batch, then as many for each record alone).
   */
  const triedOrSetAside = async (sp: ServiceProc, topic: string) => {
    await until(`${sp.target} to fail a batch of ${topic} for the token`, () => refusedBatch(sp, topic), 60_000);
    const from = await kafkaErrors(sp);
    await until(`${sp.target} to set records aside, or to try them again many times`, async () => (await deadLetters()).length > 0 || (await kafkaErrors(sp)) - from >= 20, 60_000, 250);
  };
  const api = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${cluster.ports.http}${url}`, {
      method,
      headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error: { code: string; message: string } } };
  };

  it('both are not ready, naming NEATROOTS_INTERNAL_TOKEN and the mismatch', async () => {
    for (const sp of [engine, question]) {
      const ready = await notReady(sp);
      expect([sp.target, ready.status]).toEqual([sp.target, 503]);
      expect(ready.body.error).toMatch(/^Error: the review service \(127\.0\.0\.1:\d+\) refuses this process's calls: .*does not match this service's NEATROOTS_INTERNAL_TOKEN/);
    }
  });

  it('the api answers model agreement and a draft 503 naming the question service and the mismatch, not 500', async () => {
    for (const [method, url, body] of [
      ['GET', `/v1/projects/${project}/models/agreement`, undefined],
      ['POST', `/v1/projects/${project}/checks/draft`, { concern: 'a refund issued without looking the order up' }],
    ] as const) {
      const res = await api(method, url, body);
      expect([url, res.status, res.body.error.code, res.retryAfter]).toEqual([url, 503, 'unavailable', '5']);
      expect(res.body.error.message).toMatch(/^the question service refuses this process's calls, a misconfiguration: .*carried an internal token \(x-neatroots-internal-token\) that does not match this service's NEATROOTS_INTERNAL_TOKEN/);
      expect(res.body.error.message).not.toContain(WRONG_TOKEN);
    }
  });

  it('sets nothing aside: once started with the right token, the rule engine stores the finding and the question service the answer', async () => {
    const t = Date.now();
    const items = [
      { event: 'run_start', run_id: runId, project, workflow: 'refunds', ts_ms: t },
      { run_id: runId, span_id: 's1', type: 'tool', tool: 'issue_refund', input: { order: 7 }, output: { ok: true }, start_ms: t + 1, end_ms: t + 2 },
    ].map((r) => normalizeItem(r));
    await send(cluster.ports.grpc, key, items, async () => undefined);

    // The rule engine read the spans and failed on them for the token (the run's plan, the finding's quiet check).
    await triedOrSetAside(engine, 'events');
    expect(await deadLetters()).toEqual([]);
    await cluster.stop(engine);
    cluster.wrong.delete('rule-engine');
    engine = await cluster.start('rule-engine');
    const finding = await until('the finding stored', async () => {
      const r = await db.query<{ id: string }>('SELECT id FROM findings WHERE project = $1 AND run_id = $2 AND check_id = $3', [project, runId, RULE_ID]);
      return r.rows[0];
    }, 90_000);
    expect(finding.id).toBeTruthy();

    // The question service was handed the question and failed to record its answer for the token.
    await triedOrSetAside(question, 'questions');
    expect(await deadLetters()).toEqual([]);
    await cluster.stop(question);
    cluster.wrong.delete('question');
    question = await cluster.start('question');
    const answer = await until('the answer recorded', async () => {
      const r = await db.query<{ status: string }>('SELECT status FROM question_results WHERE project = $1 AND run_id = $2 AND check_id = $3', [project, runId, QUESTION_ID]);
      return r.rows[0];
    }, 90_000);
    expect(answer.status).toBeTruthy();
    expect(await deadLetters()).toEqual([]);
  }, 300_000);
});
