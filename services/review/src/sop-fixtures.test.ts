import { existsSync, readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db, Jobs } from '@neatroots/ports';
// The review specs run on a real database; outside its tests the service may not import the adapter.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import type { QuestionAnswerer } from '@neatroots/questions';
import { readFolder, type DecisionGateway, type Recorded } from '@neatroots/sop';
import { ReviewSop } from './review/service';
import { SopSessions, type CheckSession } from './sop/sessions';
import { SopWorkspaces } from './sop/workspaces';

/**
 * What the review service's SOP specs share: the restaurant fixtures of libs/sop, a migrated
 * PGlite emptied before each test, and the luigis workspace published with its sessions
 * checked by jobs. Named *.test.ts: a helper, not run by jest.
 */
/** A QuestionAnswerer in-process as the review's decision gateway (as answererDecisions does in the question service). */
export const answererGateway = (a: QuestionAnswerer): DecisionGateway => ({ decide: (e, i, o) => a.decide(e, i, { wait: true, signal: o?.signal }), decisionModels: () => a.decisionModels() });

export const FIXTURES = path.resolve(__dirname, '../../../libs/sop/fixtures');

/** A fixture session (sessions/<name>/session.json) as it is sent. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const fixtureSession = (name: string): any => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'session.json'), 'utf8'));

/** The luigis workspace's files, as pushed to head. */
export const luigisFiles = () => [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));

/** The model answers recorded with the fixtures (decisions.json), by the session's external id: replayed by the specs. */
export function recordedDecisions(): Map<string, Recorded> {
  const recorded = new Map<string, Recorded>();
  for (const name of readdirSync(path.join(FIXTURES, 'sessions'))) {
    const file = path.join(FIXTURES, 'sessions', name, 'decisions.json');
    if (existsSync(file)) recorded.set(fixtureSession(name).external_id, JSON.parse(readFileSync(file, 'utf8')));
  }
  return recorded;
}

/** One migrated PGlite for the file (handed to `set`), these tables emptied before each test. */
/** The repeatable jobs registered on `jobs` from now on: [queue, name, cron] each (they still run). */
export function recordSchedules(jobs: Jobs): [string, string, string][] {
  const scheduled: [string, string, string][] = [];
  const schedule = jobs.schedule.bind(jobs);
  jobs.schedule = async (q, name, cron, data) => {
    scheduled.push([q, name, cron]);
    return schedule(q, name, cron, data);
  };
  return scheduled;
}

export function useMigratedDb(set: (db: Db) => void, tables: string): void {
  let db: Db;
  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    set(db);
  }, 60_000);
  afterAll(() => db.close());
  beforeEach(() => db.exec(`TRUNCATE ${tables} CASCADE`));
}

/** luigis published (as workspace `ws`), its sessions checked by `checker` on these jobs. */
export async function startLuigis(db: Db, jobs: Jobs, checker: CheckSession, ws = 'luigis'): Promise<{ workspaces: SopWorkspaces; sessions: SopSessions }> {
  const workspaces = new SopWorkspaces(db);
  await workspaces.push(ws, luigisFiles());
  await workspaces.publish(ws);
  const sessions = new SopSessions(db, workspaces, jobs, checker);
  await sessions.start();
  return { workspaces, sessions };
}

/**
 * Per test, on the file's migrated PGlite (these tables emptied): luigis published on fresh
 * inline jobs, its sessions checked by `checker` and their findings grouped by a started
 * ReviewSop, handed to `set`.
 */
export function useLuigisReview(tables: string, checker: CheckSession, set: (s: { db: Db; sessions: SopSessions; review: ReviewSop }) => void, ws = 'luigis'): void {
  let db: Db;
  let jobs: InlineJobs;
  useMigratedDb((d) => (db = d), tables);
  beforeEach(async () => {
    jobs = new InlineJobs();
    const { sessions } = await startLuigis(db, jobs, checker, ws);
    const review = new ReviewSop({ db, jobs, sessions });
    await review.start();
    set({ db, sessions, review });
  });
  afterEach(() => jobs.close());
}
