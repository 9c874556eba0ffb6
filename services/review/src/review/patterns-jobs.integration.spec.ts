import type { Db, JobHandler, Jobs } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite, serviceOrSkip } from '@neatroots/platform';
import { SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { bullReplicas } from '../bull-replicas.test';
import { PATTERNS_QUEUE } from './assign';
import { ReviewSop } from './service';

/**
 * The sopops_patterns job under a backlog of checks, embedded (InlineJobs) and distributed
 * (BullMQ on the real Redis): the checks that come while the workspace's job waits share it,
 * so 100 checks run a handful of jobs, not 100; and a check saved after a job read the
 * unassigned findings still gets a job, so no finding is left without a pattern.
 */
const redis = serviceOrSkip('redis', 'sopops_patterns jobs on BullMQ');

const RULES = ['never-price', 'greet', 'confirm'];

interface Counts {
  /** sopops_patterns runs begun, and those that assigned (then held until released). */
  runs: number;
  done: number;
  /** The ids of the sopops_patterns jobs queued, and of those finished. */
  queued: Set<string>;
  finished: Set<string>;
}

const newCounts = (): Counts => ({ runs: 0, done: 0, queued: new Set(), finished: new Set() });

/** The jobs a ReviewSop runs on, with each sopops_patterns job counted and each run held, once it assigned, until `held` resolves. */
function heldPatterns(inner: Jobs, counts: Counts, held: Promise<void>): Jobs {
  return {
    work: <T, R>(queue: string, handler: JobHandler<T, R>, opts?: Parameters<Jobs['work']>[2]) =>
      inner.work<T, R>(
        queue,
        queue !== PATTERNS_QUEUE
          ? handler
          : async (data, info) => {
              counts.runs++;
              const r = await handler(data, info);
              counts.done++;
              await held;
              counts.finished.add(info.id);
              return r;
            },
        opts as never,
      ),
    add: async (queue, data, opts) => {
      const id = await inner.add(queue, data, opts);
      if (queue === PATTERNS_QUEUE) counts.queued.add(id);
      return id;
    },
    run: (queue, data, opts) => inner.run(queue, data, opts),
    schedule: (queue, name, cron, data) => inner.schedule(queue, name, cron, data),
    close: () => inner.close(),
  };
}

async function until(cond: () => Promise<boolean>, what: () => Promise<string>, ms = 90_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`not in time: ${await what()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Saves `n` checks of `ws`, each with a finding and followed by onChecked (as the sessions do),
 * the first job held after it assigned the first finding while the other 99 are saved; then
 * lets the jobs go and returns how many ran once every finding is in a pattern.
 */
async function backlog(db: Db, ws: string, reviews: ReviewSop[], counts: Counts, release: () => void, n = 100): Promise<number> {
  const sessions = new SopSessionsRepo(db);
  const check = async (i: number) => {
    const r = await sessions.receive(ws, { external_id: `call-${i}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
    const rule = { procedure_id: 'take-order', rule_id: RULES[i % RULES.length], kind: 'never' as const, index: 1 + (i % RULES.length), text: `Rule ${i % RULES.length}.`, status: 'violated' as const, evidence: [], reason: null };
    await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings: [{ id: sopFindingId(r.id, 'take-order', rule.rule_id), ...rule }] });
    await reviews[i % reviews.length].onChecked(ws);
  };
  const unassigned = async () => Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_findings WHERE workspace = $1 AND pattern_id IS NULL', [ws])).rows[0].n);
  const state = async () => `${await unassigned()} of ${n} findings unassigned; sopops_patterns: ${counts.queued.size} jobs queued, ${counts.finished.size} finished, ${counts.runs} runs begun`;

  await check(0);
  // The first job has read the unassigned findings (assigned the first) and is still running.
  await until(async () => counts.done === 1, state);
  for (let i = 1; i < n; i++) await check(i);
  release();
  // Every job queued has finished (nothing left to run), and every finding is in a pattern.
  await until(async () => [...counts.queued].every((id) => counts.finished.has(id)) && (await unassigned()) === 0, state);
  const assigned = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_findings WHERE workspace = $1 AND pattern_id IS NOT NULL', [ws]);
  expect(Number(assigned.rows[0].n)).toBe(n);
  return counts.runs;
}

describe('sopops_patterns under a backlog of checks', () => {
  let db: Db;
  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
  }, 60_000);
  afterAll(async () => {
    await db?.close();
  });

  it('embedded (InlineJobs): 100 checks run a handful of jobs, and every finding ends in a pattern', async () => {
    const c = newCounts();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const jobs = heldPatterns(new InlineJobs(), c, held);
    const review = new ReviewSop({ db, jobs });
    await review.start();
    try {
      const runs = await backlog(db, 'coalesce-inline', [review], c, release);
      expect(runs).toBeGreaterThanOrEqual(2); // the first, and one for the 99 saved after it read
      expect(runs).toBeLessThan(5);
    } finally {
      release();
      await jobs.close();
    }
  }, 120_000);

  (redis ? it : it.skip)('distributed (BullMQ, two replicas): 100 checks run a handful of jobs, and every finding ends in a pattern', async () => {
    const replicas = bullReplicas(redis?.url ?? '', `pj-test-${process.pid}-${Date.now()}`);
    const c = newCounts();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    try {
      const reviews = [new ReviewSop({ db, jobs: heldPatterns(replicas.replica(), c, held) }), new ReviewSop({ db, jobs: heldPatterns(replicas.replica(), c, held) })];
      for (const r of reviews) await r.start();
      const runs = await backlog(db, 'coalesce-bull', reviews, c, release);
      expect(runs).toBeGreaterThanOrEqual(2);
      expect(runs).toBeLessThan(5);
    } finally {
      release();
      await replicas.close();
    }
  }, 120_000);
});
