import { Server, status } from '@grpc/grpc-js';
import { isInfrastructureError, migrate, openPostgres, scratchDatabase, serviceOrSkip, until, type ScratchDatabase } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { bindGrpc, closeGrpcServer } from '@neatroots/proto';
import { createReviewData } from './data';
import { ReviewDataClient, reviewDataGrpcService, ReviewServiceError } from './data-grpc';

/**
 * Review's data over gRPC on a real Postgres whose connection an operator ends in the middle
 * of a call (what a restart or a failover does): the caller (the rule engine asking for
 * steering) gets UNAVAILABLE with the SQLSTATE, which its bus guard retries instead of
 * setting the span aside.
 */
const SUITE = 'ReviewData over gRPC on Postgres';
const pg = serviceOrSkip('postgres', SUITE);

(pg ? describe : describe.skip)(SUITE, () => {
  const app = `neatroots-it-reviewdata-${process.pid}`;
  let scratch: ScratchDatabase;
  let db: Db;
  let admin: Db;
  let server: Server;
  let client: ReviewDataClient;

  beforeAll(async () => {
    scratch = await scratchDatabase(pg!.url, `reviewdata_${process.pid}_${Date.now().toString(36)}`);
    db = await openPostgres({ url: scratch.url, max: 2, applicationName: app });
    admin = await openPostgres({ url: scratch.url, max: 2 });
    await migrate(db);
    server = new Server();
    const svc = reviewDataGrpcService(createReviewData(db));
    server.addService(svc.service, svc.implementation);
    client = new ReviewDataClient(`127.0.0.1:${await bindGrpc(server, '127.0.0.1', 0)}`, 20_000);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    if (server) await closeGrpcServer(server);
    await db?.close();
    await admin?.close();
    await scratch?.drop();
  });

  it('answers UNAVAILABLE with SQLSTATE 57P01 when its connection is ended mid-call, and works again after', async () => {
    let asked: Promise<unknown> | undefined;
    await admin.transaction(async (tx) => {
      // hold the call inside Postgres, then end review's connection as a restart would
      await tx.query('LOCK TABLE projects IN ACCESS EXCLUSIVE MODE');
      asked = client.steering('shop').catch((e: unknown) => e);
      const pid = await until('review\'s query waiting on the lock', async () => {
        const r = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, [app]);
        return r.rows[0]?.pid;
      }, 15_000);
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    });
    const err = (await asked) as ReviewServiceError;
    expect(err).toBeInstanceOf(ReviewServiceError);
    expect(err.message).toBe('review service: steering: review: terminating connection due to administrator command');
    expect(err.code).toBe(status.UNAVAILABLE);
    expect(err.sqlstate).toBe('57P01');
    expect(isInfrastructureError(err)).toBe(true);
    // the pool takes a fresh connection: the next call is answered
    expect(await client.steering('shop')).toBe(false);
  });
});
