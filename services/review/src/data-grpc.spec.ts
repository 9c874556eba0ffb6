import * as net from 'node:net';
import { Server, status } from '@grpc/grpc-js';
import { isInfrastructureError, migrate, openPglite, withSetAside } from '@neatroots/platform';
import type { BusBatch, Db, DeadLetter, Queryable } from '@neatroots/ports';
import { DatabaseError } from 'pg';
import { bindGrpc, closeGrpcServer } from '@neatroots/proto';
import type { Plan } from '@neatroots/questions';
import { agentChecksFull, ProjectsRepo, QuestionsRepo } from '@neatroots/store';
import { createReviewData } from './data';
import { ReviewDataClient, reviewDataGrpcService, ReviewServiceError } from './data-grpc';

/**
 * What the rule engine and the question service keep in review's database, asked over gRPC
 * exactly as they do in the distributed deployment: the same answers as in-process.
 */
let db: Db;
let server: Server;
let client: ReviewDataClient;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  server = new Server();
  const svc = reviewDataGrpcService(createReviewData(db));
  server.addService(svc.service, svc.implementation);
  const port = await bindGrpc(server, '127.0.0.1', 0);
  client = new ReviewDataClient(`127.0.0.1:${port}`);
}, 60_000);
afterAll(async () => {
  client?.close();
  await closeGrpcServer(server);
  await db?.close();
});

describe('ReviewData over gRPC', () => {
  it('keeps plans, classifier models, agreement and results, and answers steering, quiet checks and database checks', async () => {
    const plan = { project: 'shop', workflow: 'refunds', tools: ['lookup'], planned_by: 'classifier' } as unknown as Plan;
    expect(await client.plans.get('shop', 'refunds')).toBeUndefined();
    await client.plans.put(plan);
    expect(await client.plans.get('shop', 'refunds')).toMatchObject({ project: 'shop', workflow: 'refunds', tools: ['lookup'] });

    const model = { n: 3, w: [0.5, -1] } as never;
    await client.classifier.save([{ key: 'q1', check_id: 'c1', model }]);
    const models = await client.classifier.load(['q1', 'nope']);
    expect([...models.keys()]).toEqual(['q1']);
    expect(models.get('q1')).toEqual(model);

    await client.agreement.save([{ key: 'q1', check_id: 'c1', answers: 4, agreed: 3, recent: '1101' }]);
    expect((await client.agreement.load(['q1'])).get('q1')).toMatchObject({ answers: 4, agreed: 3 });
    expect((await client.agreement.list()).map((a) => a.key)).toEqual(['q1']);

    await client.putCheck({ id: 'planned-1', yaml: 'id: planned-1\n', origin: 'planner', project: 'shop', workflow: 'refunds' });
    expect(await client.checks()).toEqual([{ id: 'planned-1', yaml: 'id: planned-1\n', origin: 'planner' }]);
    // A project's own records (the authoring API's), and deleting one of them only.
    await client.putCheck({ id: 'mine', yaml: 'id: mine\n', origin: 'cli', project: 'shop', saved: true });
    await client.putCheck({ id: 'mine', yaml: 'id: mine\n', origin: 'agent', project: 'other' });
    expect((await client.checkRecords('shop')).map((c) => [c.id, c.origin, c.saved])).toEqual([['planned-1', 'planner', false], ['mine', 'cli', true]]);
    expect(await client.deleteCheck('shop', 'mine')).toBe(true);
    expect(await client.deleteCheck('shop', 'mine')).toBe(false);
    expect((await client.checkRecords('other')).map((c) => c.id)).toEqual(['mine']);
    await client.deleteCheck('other', 'mine');

    await client.results.record([
      { task_id: 't1', project: 'shop', run_id: 'r1', check_id: 'c1', anchor: 'run', span_ids: ['s1'], answer: { status: 'not_checked', flagged: false, reason: 'timeout' }, at_ms: 1_700_000_000_000 },
    ]);
    expect(await new QuestionsRepo(db).results('shop', 'r1')).toEqual([expect.objectContaining({ task_id: 't1', status: 'not_checked', reason: 'timeout' })]);
    // The tasks the rule engine handed over wait for their results (the run page's questions_pending): t1's came already.
    await client.results.handed!([
      { task_id: 't1', project: 'shop', run_id: 'r1' },
      { task_id: 't2', project: 'shop', run_id: 'r1' },
    ]);
    const waiting = () => new QuestionsRepo(db).pending('shop', 'r1');
    expect(await waiting()).toBe(1);
    await client.results.record([
      { task_id: 't2', project: 'shop', run_id: 'r1', check_id: 'c1', anchor: 's2', span_ids: ['s2'], answer: { status: 'answered', flagged: false }, at_ms: 1_700_000_000_000 },
    ]);
    expect(await waiting()).toBe(0);

    expect(await client.steering('shop')).toBe(false);
    await new ProjectsRepo(db).setSteering('shop', true);
    expect(await client.steering('shop')).toBe(true);
    expect(await client.quietChecks('shop')).toEqual([]);
  });

  it('answers the database checks whole past gRPC\'s default 4 MiB reply: 120 checks of 40 KB', async () => {
    const pad = `# ${'p'.repeat(2_000)}\n`.repeat(20);
    const ids = Array.from({ length: 120 }, (_, i) => `big-${String(i).padStart(3, '0')}`);
    for (const id of ids) await client.putCheck({ id, yaml: `${pad}id: ${id}\n`, origin: 'cli', project: 'large', saved: true });
    // 4.8 MB: the api's checks endpoints and MCP tools read a project's, every service's check set all of them.
    const records = await client.checkRecords('large');
    expect(records.map((c) => c.id)).toEqual(ids);
    expect(records.reduce((n, c) => n + c.yaml.length, 0)).toBeGreaterThan(4 * 1024 * 1024);
    expect((await client.checks()).filter((c) => c.id.startsWith('big-'))).toHaveLength(120);
    for (const id of ids) await client.deleteCheck('large', id);
  }, 60_000);

  it("refuses a coding agent's new check past its project's bound, all at once included, in words the api reads back", async () => {
    const agent = (id: string) => ({ id, yaml: `id: ${id}\n`, origin: 'agent' as const, project: 'bounded', agent_checks_max: 2 });
    await client.putCheck(agent('a-1'));
    const all = await Promise.allSettled(['a-2', 'a-3', 'a-4', 'a-5'].map((id) => client.putCheck(agent(id))));
    expect(all.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of all.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
      expect(r.reason).toBeInstanceOf(ReviewServiceError);
      expect(r.reason).toMatchObject({ code: status.INVALID_ARGUMENT });
      expect(agentChecksFull((r.reason as ReviewServiceError).details)).toEqual({ agents: 2, max: 2 });
    }
    const kept = (await client.checkRecords('bounded')).map((c) => c.id);
    expect(kept).toHaveLength(2);
    // replacing one of them is not a new one; a person's save is not bounded
    await client.putCheck({ ...agent(kept[1]), yaml: `id: ${kept[1]}\n# again\n` });
    await client.putCheck({ id: 'persons', yaml: 'id: persons\n', origin: 'cli', project: 'bounded', saved: true });
    expect((await client.checkRecords('bounded')).map((c) => c.id).sort()).toEqual([...kept, 'persons'].sort());
  });

  it('says which call failed when the review service is not there', async () => {
    const nobody = new ReviewDataClient('127.0.0.1:1', 500);
    await expect(nobody.quietChecks('shop')).rejects.toThrow(/review service: quietChecks/);
    nobody.close();
  });

  describe('a review or a database that is away is not blamed on the message being handled', () => {
    /** What pg throws while Postgres starts up, or after an operator ended the connection. */
    const pgError = (code: string, message: string) => Object.assign(new DatabaseError(message, message.length, 'error'), { code, severity: 'FATAL' });

    /** A real review gRPC server on `store`, and a client of it. */
    const serve = async (store: Queryable) => {
      const s = new Server();
      const svc = reviewDataGrpcService(createReviewData(store));
      s.addService(svc.service, svc.implementation);
      const port = await bindGrpc(s, '127.0.0.1', 0);
      return { client: new ReviewDataClient(`127.0.0.1:${port}`, 2_000), close: () => closeGrpcServer(s) };
    };

    /** The bus guard every consumer reads through, on a handler that asks review (the rule engine's steering). */
    const guarded = (c: ReviewDataClient) => {
      const letters: DeadLetter[] = [];
      const handle = withSetAside(async () => void (await c.steering('shop')), { topic: 'events', group: 'rule-engine', stopping: () => false, onError: () => undefined, sink: { setAside: async (l) => void letters.push(...l) } }, { attempts: 2, retryDelayMs: 1 });
      const batch: BusBatch<unknown> = { topic: 'events', partition: 0, records: [{ key: 'r1', value: { project: 'shop', item: { kind: 'span', span: { run_id: 'r1', span_id: 's1' } } } }], heartbeat: async () => undefined };
      return { letters, run: () => handle(batch) };
    };

    it.each([
      ['starting up (57P03)', '57P03', 'the database system is starting up'],
      ['shutting down (57P01)', '57P01', 'terminating connection due to administrator command'],
      ['out of connections (53300)', '53300', 'sorry, too many clients already'],
    ])('the database %s: review answers UNAVAILABLE, the batch is retried and nothing is set aside', async (_name, code, message) => {
      let down = true;
      const store: Queryable = { query: (sql, params) => (down ? Promise.reject(pgError(code, message)) : db.query(sql, params)) };
      const { client: c, close } = await serve(store);
      try {
        const err = (await c.steering('shop').catch((e: unknown) => e)) as ReviewServiceError;
        expect(err).toBeInstanceOf(ReviewServiceError);
        expect(err.message).toBe(`review service: steering: review: ${message}`);
        expect(err.code).toBe(status.UNAVAILABLE);
        expect(err.sqlstate).toBe(code);
        expect(isInfrastructureError(err)).toBe(true);
        const g = guarded(c);
        await expect(g.run()).rejects.toThrow(message);
        expect(g.letters).toEqual([]);
        // once the database is back, the same batch goes through
        down = false;
        await g.run();
        expect(g.letters).toEqual([]);
      } finally {
        c.close();
        await close();
      }
    });

    it('a review that never answers: the deadline passes, and the batch is retried, not set aside', async () => {
      // accepts the connection and says nothing (a hung review, a half-open connection)
      const sockets: net.Socket[] = [];
      const hung = net.createServer((sock) => void sockets.push(sock)).listen(0, '127.0.0.1');
      await new Promise((r) => hung.once('listening', r));
      const c = new ReviewDataClient(`127.0.0.1:${(hung.address() as net.AddressInfo).port}`, 500);
      try {
        const err = (await c.quietChecks('shop').catch((e: unknown) => e)) as ReviewServiceError;
        expect(err.message).toMatch(/^review service: quietChecks: Deadline exceeded/);
        expect(err.code).toBe(status.DEADLINE_EXCEEDED);
        expect(isInfrastructureError(err)).toBe(true);
        const g = guarded(c);
        await expect(g.run()).rejects.toThrow(/Deadline exceeded/);
        expect(g.letters).toEqual([]);
      } finally {
        c.close();
        for (const sock of sockets) sock.destroy();
        hung.close();
      }
    });

    it('but an error of the request itself is still INTERNAL, and set aside after the tries', async () => {
      const store: Queryable = { query: () => Promise.reject(pgError('22P02', 'invalid input syntax for type json')) };
      const { client: c, close } = await serve(store);
      try {
        const err = (await c.steering('shop').catch((e: unknown) => e)) as ReviewServiceError;
        expect(err.code).toBe(status.INTERNAL);
        expect(isInfrastructureError(err)).toBe(false);
        const g = guarded(c);
        await g.run();
        expect(g.letters).toEqual([expect.objectContaining({ project: 'shop', run_id: 'r1', reason: 'review service: steering: review: invalid input syntax for type json' })]);
      } finally {
        c.close();
        await close();
      }
    });
  });
});
