import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { createReviewQueries, startSop } from '@neatroots/review';
import { checkSession, readFolder, recordedDecider, type Recorded } from '@neatroots/sop';
import { ProjectsRepo } from '@neatroots/store';
import { main } from './sopops';

/**
 * `sopops calibrate` against a running server: five fixture sessions broke the never rule with
 * probabilities 0.91 to 0.99, and a reviewer judged the three least sure of them wrong.
 */
const FIXTURES = path.resolve(__dirname, '../../../libs/sop/fixtures');
const KEY = 'luigis-key';
const fixture = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'session.json'), 'utf8'));
const recorded: Recorded = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'decisions.json'), 'utf8'));
let db: Db;
let jobs: InlineJobs;
let app: INestApplication;
let url: string;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('luigis', KEY);
  jobs = new InlineJobs();
  const sop = await startSop({
    db,
    jobs,
    checkSession: ({ lock, releaseId, session, onDecision }) => {
      const p = Number((session.external_id ?? '').split('@')[1]);
      const base = recordedDecider(recorded);
      return checkSession(lock, session, { releaseId, onDecision, decider: { ...base, decide: async (q) => ((a) => (a.decided && q.kind === 'never' ? { ...a, probability: p } : a))(await base.decide(q)) } });
    },
  });
  await sop.queries.pushHead('luigis', [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([f, text]) => ({ path: f, text })));
  await sop.queries.publish('luigis');
  const ids: string[] = [];
  for (const [i, p] of [0.91, 0.92, 0.93, 0.98, 0.99].entries()) ids.push((await sop.queries.receiveSession('luigis', { ...fixture, external_id: `call-8#${i}@${p}` })).id);
  for (let i = 0; i < 500; i++) {
    const waiting = await db.query<{ n: number }>(`SELECT (SELECT count(*) FROM sop_sessions WHERE status = 'queued') + (SELECT count(*) FROM sop_findings WHERE pattern_id IS NULL) AS n`);
    if (Number(waiting.rows[0].n) === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const findings = (await Promise.all(ids.map((id) => sop.queries.getSession('luigis', id)))).map((v) => v.checks.flatMap((c) => c.rules).find((r) => r.finding)!);
  await sop.review.giveVerdict('luigis', findings[0].pattern_id!, { verdict: 'real' });
  for (const f of findings.slice(0, 3)) await sop.review.overrideFinding('luigis', f.finding_id!, { correct: false });
  app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => new ProjectsRepo(db).resolveApiKey(k), sop: sop.queries, review: sop.review, port: 0, host: '127.0.0.1' });
  url = apiUrl(app);
}, 60_000);
afterAll(async () => {
  await app.close();
  await jobs.close();
  await db.close();
});

async function sopops(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), env: { NEATROOTS_API_KEY: KEY, NEATROOTS_URL: url }, cwd: process.cwd() });
  return { code, out, err };
}

describe('sopops calibrate', () => {
  it('--dry-run prints the fit and stores nothing; without it the band is saved', async () => {
    const dry = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'take-order', '--dry-run']);
    expect(dry).toEqual({
      code: 0,
      out: [
        'take-order: 5 labels (3 negative), score 0.4 -> 1; not saved (dry run)',
        '  never rule 1 "Volunteer a price or a description of a dish." (never): [0.1, 0.9, 0.5] -> [0.1, 0.955, 0.5]',
        '  6 questions kept their bands: fewer than 3 labeled failures on the rule',
      ],
      err: [],
    });
    expect((await db.query('SELECT 1 FROM sop_calibration_bands')).rows).toHaveLength(0);

    const saved = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'take-order']);
    expect(saved.code).toBe(0);
    expect(saved.out[0]).toBe('take-order: 5 labels (3 negative), score 0.4 -> 1; saved');
    expect((await db.query('SELECT band_yes FROM sop_calibration_bands')).rows).toEqual([{ band_yes: 0.955 }]);
  });

  it('a refused procedure says why and exits 1; --json prints the answer as it is', async () => {
    const r = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'card-payment']);
    expect(r).toEqual({
      code: 1,
      out: ['card-payment: not calibrated: too_few_labeled_sessions (have 0, need 5): procedure card-payment has 0 labeled sessions (a session with a finding that has a verdict or an override); calibration needs 5'],
      err: [],
    });
    const j = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'nope', '--json']);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.out[0])).toMatchObject({ workspace: 'luigis', dry_run: false, procedures: [{ procedure_id: 'nope', skipped: { code: 'not_in_release' } }] });
  });

  it('wrong options exit 2; a server refusal exits 1 with its words', async () => {
    expect((await sopops(['calibrate', '--workspace', 'luigis', 'extra'])).code).toBe(2);
    const bad = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'Take Order']);
    expect(bad.code).toBe(1);
    expect(bad.err[0]).toMatch(/^sopops calibrate: POST .*\/calibrate: 400 invalid_body: "procedure" must be a procedure id/);
  });
});
