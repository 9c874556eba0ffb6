import { Server } from '@grpc/grpc-js';
import { migrate, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { bindGrpc, closeGrpcServer } from '@neatroots/proto';
import type { Plan } from '@neatroots/questions';
import { ProjectsRepo, QuestionsRepo } from '@neatroots/store';
import { createReviewData } from './data';
import { ReviewDataClient, reviewDataGrpcService } from './data-grpc';

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

    expect(await client.steering('shop')).toBe(false);
    await new ProjectsRepo(db).setSteering('shop', true);
    expect(await client.steering('shop')).toBe(true);
    expect(await client.quietChecks('shop')).toEqual([]);
  });

  it('says which call failed when the review service is not there', async () => {
    const nobody = new ReviewDataClient('127.0.0.1:1', 500);
    await expect(nobody.quietChecks('shop')).rejects.toThrow(/review service: quietChecks/);
    nobody.close();
  });
});
