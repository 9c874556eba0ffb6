import type { Db } from '@neatroots/ports';
import { DeadLettersRepo, FindingsRepo, RunsRepo, StoreWriter } from '@neatroots/store';
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { migrate } from '../db/migrate';
import { openPglite } from '../db/pglite';
import { openPostgres } from '../db/postgres';
import { serviceOrSkip, uniqueName } from '../testing/services';
import { dbUpsertContract } from './db.contract.test';

/**
 * The upsert part of the Db contract on both drivers, and the store's repositories on both:
 * a batch delivered twice (the bus is at-least-once) writes nothing new.
 * PGlite needs NODE_OPTIONS=--experimental-vm-modules under jest (it loads its WASM with import()).
 */

/** A Postgres schema of its own, so runs of this suite and other suites sharing the server do not meet. */
function isolatedPostgres(url: string) {
  const schema = uniqueName('it_db');
  const admin = () => openPostgres({ url, max: 1 });
  const withSchema = new URL(url);
  withSchema.searchParams.set('options', `-c search_path=${schema}`);
  return {
    schema,
    async create() {
      const db = await admin();
      await db.exec(`CREATE SCHEMA ${schema}`);
      await db.close();
    },
    async open() {
      const db = await openPostgres({ url: withSchema.toString(), max: 4, applicationName: 'neatroots-it' });
      const current = (await db.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]?.s;
      if (current !== schema) throw new Error(`search_path not applied: in ${current}, not ${schema}`);
      return db;
    },
    async drop() {
      const db = await admin();
      await db.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    },
  };
}

const T0 = Date.parse('2025-01-01T00:00:00.000Z');

function finding(over: Partial<FindingMessage> & { id: string }): FindingMessage {
  return {
    check_id: 'repeated-tool-call', run_id: 'r1', project: 'p1', status: 'raised', span_ids: ['s1', 's2', 's3'], count: 3,
    action: 'flag', title: 'Same tool called repeatedly', guidance: 'You have called search 3 times', at_ms: T0 + 1000,
    priority: 0, kind: 'rule', source: 'library', ...over,
  };
}

function span(run_id: string, span_id: string, start: number): Envelope {
  return { project: 'p1', received_ms: T0 + start, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: T0 + start } } };
}

function storeRedelivery(name: string, open: () => Promise<Db>): void {
  describe(`store repositories on ${name}: a redelivered batch writes nothing new`, () => {
    let db: Db;
    beforeAll(async () => {
      db = await open();
      await migrate(db);
      expect((await migrate(db)).applied).toEqual([]); // idempotent on this driver too
    }, 60_000);
    afterAll(() => db.close());

    const snapshot = async () => ({
      findings: (await db.query('SELECT id, count, status, span_ids, raised_at, updated_at, resolved_at FROM findings ORDER BY id')).rows,
      stats: (await db.query('SELECT project, check_id, findings FROM check_stats ORDER BY project, check_id')).rows,
      runs: (await db.query('SELECT project, run_id, started_at, span_count, error_count FROM runs ORDER BY run_id')).rows,
      spans: (await db.query('SELECT project, run_id, span_id, start_ms FROM spans ORDER BY run_id, span_id')).rows,
    });

    it('stores findings and runs once, however often the batch comes', async () => {
      const findings = new FindingsRepo(db);
      const runs = new RunsRepo(db);
      const batch = [
        finding({ id: 'f1' }),
        finding({ id: 'f2', check_id: 'errors', run_id: 'r2' }),
        finding({ id: 'f1', status: 'updated', count: 4, span_ids: ['s1', 's2', 's3', 's4'], at_ms: T0 + 2000 }),
      ];
      const envs = [span('r1', 's1', 10), span('r1', 's2', 20), span('r2', 's1', 30)];
      await findings.apply(batch);
      await runs.writeEnvelopes(envs);
      const once = await snapshot();
      expect(once.findings).toHaveLength(2);
      expect(once.stats).toEqual([
        { project: 'p1', check_id: 'errors', findings: 1 },
        { project: 'p1', check_id: 'repeated-tool-call', findings: 1 },
      ]);
      expect(once.spans).toHaveLength(3);
      // the consumer crashed before committing its offset: the same batch again, twice
      for (let i = 0; i < 2; i++) {
        await findings.apply(batch);
        await runs.writeEnvelopes(envs);
      }
      expect(await snapshot()).toEqual(once);
    });

    it('counts a span once when two consumers write the same batch at the same time (a rebalance)', async () => {
      const envs = [span('r3', 's1', 40), span('r3', 's2', 50), span('r4', 's1', 60), span('r3', 's3', 70)];
      // the runs in the other order too: the two transactions lock them in the same order anyway
      const reversed = [...envs].reverse();
      await Promise.all([
        db.transaction((tx) => new RunsRepo(tx).writeEnvelopes(envs)),
        db.transaction((tx) => new RunsRepo(tx).writeEnvelopes(reversed)),
        db.transaction((tx) => new RunsRepo(tx).writeEnvelopes(envs)),
      ]);
      const runs = new RunsRepo(db);
      expect((await runs.get('p1', 'r3'))?.span_count).toBe(3);
      expect((await runs.get('p1', 'r4'))?.span_count).toBe(1);
    });
  });
}

/** The store writer on this driver: what the database refuses is set aside, the rest stored. */
function storeSetsAside(name: string, open: () => Promise<Db>): void {
  describe(`store writer on ${name}: one item the database refuses is set aside, the others stored`, () => {
    let db: Db;
    beforeAll(async () => {
      db = await open();
      await migrate(db);
    }, 60_000);
    afterAll(() => db.close());

    it('stores every other item of the batch and keeps the refused ones in dead_letters with the error', async () => {
      const w = new StoreWriter(db, { flushMs: 60_000, retryBaseMs: 1, onError: () => undefined });
      const huge = (id: string): Envelope => ({ ...span('rx', id, 5), item: { kind: 'span', span: { run_id: 'rx', span_id: id, type: 'llm', name: 'chat', status: 'ok', usage: { total_tokens: 5e18 } } } });
      const writes = [
        w.writeEvents([span('ra', 's1', 1), span('ra', 's2', 2)]),
        // alone each fits a bigint; the run's total of both does not
        w.writeEvents([huge('x1'), huge('x2')]),
        w.writeFindings([finding({ id: 'w-ok' }), finding({ id: 'w-bad', count: 3e9 })]),
        w.writeEvents([span('rb', 's1', 3)]),
      ];
      await w.flush();
      await Promise.all(writes);
      await w.close();
      const runs = new RunsRepo(db);
      expect((await runs.get('p1', 'ra'))?.span_count).toBe(2);
      expect((await runs.get('p1', 'rb'))?.span_count).toBe(1);
      expect((await runs.get('p1', 'rx'))?.span_count).toBe(1);
      expect(await new FindingsRepo(db).get('p1', 'w-ok')).not.toBeNull();
      const letters = (await new DeadLettersRepo(db).list('p1')).items;
      expect(letters.map((d) => d.item_id).sort()).toEqual(['w-bad', 'x2']);
      for (const d of letters) expect(d.reason).toMatch(/out of range.*\(SQLSTATE 22003\)/);
    }, 60_000);
  });
}

dbUpsertContract('PGlite', () => openPglite());
storeRedelivery('PGlite', async () => openPglite());
storeSetsAside('PGlite', async () => openPglite());

const pg = serviceOrSkip('postgres', 'Db contract on Postgres');
if (pg) {
  const iso = isolatedPostgres(pg.url);
  beforeAll(() => iso.create(), 30_000);
  afterAll(() => iso.drop(), 30_000);
  dbUpsertContract('Postgres server', iso.open);
  storeRedelivery('Postgres server', iso.open);
  storeSetsAside('Postgres server', iso.open);
} else {
  describe.skip('Db contract on Postgres (no Postgres)', () => it('needs Postgres', () => undefined));
}
