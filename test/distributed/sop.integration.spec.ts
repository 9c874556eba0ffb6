import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { openPostgres, requireService, until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { Cluster, freePort, type ServiceProc } from './cluster';

/**
 * SOP checks in the distributed deployment, each service its own process on the real Kafka,
 * Redis and Postgres: a procedures folder pushed and published with the real sopops CLI
 * against the api process, sessions in and results out over REST, each check a BullMQ job on
 * Redis shared by two review replicas (each session checked once), re-sent content writing
 * nothing, new content replacing the results, and a neatroots run becoming a session.
 */
const SUITE = 'SOP checks, distributed';
const kafka = requireService('kafka', SUITE);
const redisUrl = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redisUrl && pg ? describe : describe.skip;

const WS = `shop-${Date.now().toString(36)}`;
const KEY = `key-${WS}`;
const SOPOPS = path.resolve(__dirname, '../../packages/neatroots/bin/sopops.js');

const REFUND = `# Refund an order
Goal: The customer gets the refund they are owed.

## Steps
1. Look up the order. [tool: lookup_order, required]
2. Issue the refund. [tool: issue_refund, required]
3. Tell the customer when the money arrives.
`;
const AGENT = 'instructions: You handle refunds for the shop.\nprocedures: [refund]\n';

type Rule = { kind: string; index: number; status: string };
type Checked = { status: string; result: string; checked_at: string; release_id: string; checks: { procedure_id: string; rules: Rule[] }[] };

function refundSession(externalId: string, tools: string[]) {
  return {
    external_id: externalId,
    agent: 'refund-agent',
    turns: [
      { role: 'user', text: 'Please refund order 42' },
      { role: 'agent', text: 'Done, the money arrives in 3 days.' },
    ],
    tool_calls: tools.map((tool) => ({ turn: 1, tool, input: { order: 42 }, output: { ok: true } })),
  };
}

maybe(SUITE, () => {
  let cluster: Cluster;
  let review: ServiceProc;
  let replica: ServiceProc;
  let redis: Redis;
  let folder: string;
  let base: string;
  const queueKey = () => `${cluster.prefix}jobs:sopops_check`;

  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // JSON.parse: every answer is asserted on field by field
    return { status: res.status, body: JSON.parse(await res.text()) };
  };
  const checked = (id: string, after?: string) =>
    until(`session ${id} checked`, async () => {
      const s = (await api('GET', `/sessions/${id}`)).body as Checked;
      return s.status === 'checked' && s.checked_at !== after ? s : undefined;
    });
  const statuses = (s: Checked) => s.checks[0].rules.map((r) => `${r.kind} ${r.index} ${r.status}`);
  const sopops = async (args: string[]) => {
    const r = await promisify(execFile)(process.execPath, [SOPOPS, ...args, '--workspace', WS, '--url', `http://127.0.0.1:${cluster.ports.http}`], {
      env: { PATH: process.env.PATH, NEATROOTS_API_KEY: KEY },
    });
    return r.stdout.trim().split('\n');
  };
  /** The completed sopops_check jobs in Redis: id, the session and the process that ran it. */
  const completed = async () => {
    const ids = await redis.zrange(`${queueKey()}:completed`, 0, -1);
    return Promise.all(
      ids.map(async (id) => {
        const h = await redis.hgetall(`${queueKey()}:${id}`);
        // stacktrace: the stacks of the tries that failed before the one that completed
        return { id, session: (JSON.parse(h.data) as { session_id: string }).session_id, by: h.pb, started: Number(h.ats ?? 0), failed: h.stacktrace };
      }),
    );
  };

  /**
   * The completed jobs of these sessions, once there is one for each: BullMQ moves a job to
   * completed after its handler returns, so a session can read as checked a moment before.
   */
  const completedFor = (sessions: string[]) =>
    until(`a completed sopops_check job for each of ${sessions.length} sessions`, async () => {
      const jobs = (await completed()).filter((j) => sessions.includes(j.session));
      return new Set(jobs.map((j) => j.session)).size === sessions.length ? jobs : undefined;
    });

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redisUrl!, pg: pg! }, { NEATROOTS_API_KEYS: `${WS}=${KEY}` });
    await cluster.init();
    // review first: it migrates the database; then a second review replica on its own port
    review = await cluster.start('review');
    replica = await cluster.start('review', { NEATROOTS_REVIEW_PORT: String(await freePort()) });
    await Promise.all([cluster.start('question'), cluster.start('ingest'), cluster.start('api')]);
    redis = new Redis(redisUrl!, { maxRetriesPerRequest: 2 });
    base = `http://127.0.0.1:${cluster.ports.http}/v1/workspaces/${WS}`;
    folder = fs.mkdtempSync(path.join(cluster.home, 'procedures-'));
    fs.mkdirSync(path.join(folder, 'procedures'));
    fs.mkdirSync(path.join(folder, 'agents'));
    fs.writeFileSync(path.join(folder, 'procedures', 'refund.md'), REFUND);
    fs.writeFileSync(path.join(folder, 'agents', 'refund-agent.yaml'), AGENT);
  }, 180_000);

  afterAll(async () => {
    redis?.disconnect();
    await cluster?.close();
  }, 60_000);

  it('pushes a procedures folder with sopops push and publishes it with sopops publish, against the api process', async () => {
    const pushed = await sopops(['push', folder]);
    expect(pushed).toEqual([`pushed 2 files to ${WS}`, 'unpublished against no release yet:', '  added   agents/refund-agent.yaml', '  added   procedures/refund.md']);
    const published = await sopops(['publish']);
    expect(published[0]).toMatch(new RegExp(`^published release 1 \\(rel_[\\w-]+\\) of ${WS}: 1 procedure, live$`));
    expect(await sopops(['push', folder])).toContain('nothing unpublished (head is release 1)');
    const live = await api('GET', '/releases/live');
    expect(live.body).toMatchObject({ number: 1, live: true, agents: [{ agent: 'refund-agent', procedures: ['refund'] }] });
  });

  it('checks a session sent in as a BullMQ job on Redis; re-sent content is unchanged and writes nothing; new content replaces the results', async () => {
    const sent = await api('POST', '/sessions', refundSession('call-1', ['lookup_order', 'issue_refund']));
    expect(sent).toMatchObject({ status: 202, body: { external_id: 'call-1', status: 'queued' } });
    const first = await checked(sent.body.id);
    expect(first.release_id).toMatch(/^rel_/);
    expect(statuses(first)).toEqual(['step 1 done', 'step 2 done', 'step 3 not_checked']);
    // no model: what only a model decides keeps the procedure from being followed
    expect(first.result).toBe('not_measurable');
    const jobs = await completedFor([sent.body.id]);
    expect(jobs).toHaveLength(1);

    const again = await api('POST', '/sessions', refundSession('call-1', ['lookup_order', 'issue_refund']));
    expect(again).toMatchObject({ status: 202, body: { id: sent.body.id, status: 'unchanged' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect((await completed()).filter((j) => j.session === sent.body.id)).toHaveLength(1);
    expect(await redis.llen(`${queueKey()}:wait`)).toBe(0);
    expect((await api('GET', `/sessions/${sent.body.id}`)).body.checked_at).toBe(first.checked_at);

    // the refund issued without the lookup: the same session, new content, new results
    const changed = await api('POST', '/sessions', refundSession('call-1', ['issue_refund']));
    expect(changed.body).toMatchObject({ id: sent.body.id, status: 'queued' });
    const second = await checked(sent.body.id, first.checked_at);
    expect(statuses(second)).toEqual(['step 1 skipped', 'step 2 done', 'step 3 not_checked']);
    expect(second.result).toBe('deviated');
    const db = await openPostgres({ url: cluster.pgUrl });
    try {
      const checks = await db.query<{ n: string }>('SELECT count(*) AS n FROM sop_checks WHERE session_id = $1', [sent.body.id]);
      expect(Number(checks.rows[0].n)).toBe(1);
      const findings = await db.query<{ index: number; status: string }>('SELECT index, status FROM sop_findings WHERE session_id = $1', [sent.body.id]);
      expect(findings.rows).toEqual([{ index: 1, status: 'skipped' }]);
    } finally {
      await db.close();
    }
    const listed = await api('GET', '/sessions?result=deviated');
    expect(listed.body.items.map((s: { external_id: string }) => s.external_id)).toContain('call-1');
  });

  it('two review replicas share the queue: each session is checked exactly once', async () => {
    const n = 40;
    const sent = await Promise.all(
      Array.from({ length: n }, (_, i) => api('POST', '/sessions', refundSession(`batch-${i}`, i % 2 ? ['lookup_order', 'issue_refund'] : ['issue_refund']))),
    );
    const ids = new Set(sent.map((s) => s.body.id as string));
    expect(ids.size).toBe(n);
    for (const id of ids) await checked(id);
    const jobs = await completedFor([...ids]);
    // one job per session, none failed
    expect(jobs).toHaveLength(n);
    expect(new Set(jobs.map((j) => j.session)).size).toBe(n);
    // Each started once, unless a try failed and the job was tried again (BullMQ keeps the
    // failed tries' stacks): a start with no failed try before it would be a job two replicas
    // took. A try that failed is shown with its replica's log lines, as a warning.
    const lines = [...review.output, ...replica.output].join('').split('\n');
    const again = jobs.filter((j) => j.started !== 1).map((j) => ({ ...j, failed: JSON.parse(j.failed ?? '[]') as string[], log: lines.filter((l) => l.includes(j.id)) }));
    if (again.length) console.warn(`sopops_check jobs tried more than once:\n${JSON.stringify(again, null, 2)}`);
    expect(again.filter((j) => j.failed.length !== j.started - 1)).toEqual([]);
    expect(await redis.zcard(`${queueKey()}:failed`)).toBe(0);
    // and both replicas took part (a job's processedBy is its worker's host:pid)
    const by = new Set(jobs.map((j) => j.by.split(':').pop()));
    expect([...by].sort()).toEqual([String(review.proc.pid), String(replica.proc.pid)].sort());
  });

  it("makes a session of a neatroots run of an agent of the live release, sent to the ingest process, and checks it", async () => {
    const client = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, flushIntervalMs: 20 });
    let runId: string;
    try {
      const run = client.startRun({ workflow: 'refund-agent', user_message: 'Refund my order 42 please' });
      runId = run.id;
      await run.toolCall('lookup_order', { order: 42 }, () => ({ id: 42 }));
      await run.toolCall('issue_refund', { order: 42 }, () => ({ ok: true }));
      run.span({ type: 'llm', name: 'chat', output: 'Refunded; the money arrives in 3 days.' });
      await run.end({ final_output: 'Refunded; the money arrives in 3 days.' });
    } finally {
      await client.close();
    }
    const listed = await until('the run listed as a session', async () => {
      const items = (await api('GET', '/sessions?agent=refund-agent&limit=100')).body.items as { id: string; external_id: string }[];
      return items.find((s) => s.external_id === `run:${runId}`);
    });
    const s = await checked(listed.id);
    expect(statuses(s)).toEqual(['step 1 done', 'step 2 done', 'step 3 not_checked']);
    expect(await completedFor([listed.id])).toHaveLength(1);
  });
});
