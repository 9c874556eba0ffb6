import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { checkSession, recordedDecider, type Recorded } from '@neatroots/sop';
import { eventually, FIXTURES, fixtureFolder, fixtureSession } from '../../../services/api/src/sop-harness.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops calibrate` against a running server: five fixture sessions broke the never rule with
 * probabilities 0.91 to 0.99, and a reviewer judged the three least sure of them wrong.
 */
const KEY = 'luigis-key';
const fixture = fixtureSession('phone-never-violated');
const recorded: Recorded = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'decisions.json'), 'utf8'));
let db: Db;
let server: SopopsServer;
let url: string;

beforeAll(async () => {
  server = await startSopopsServer('luigis', KEY, {
    sop: {
      checkSession: ({ lock, releaseId, session, onDecision }) => {
        const p = Number((session.external_id ?? '').split('@')[1]);
        const base = recordedDecider(recorded);
        return checkSession(lock, session, { releaseId, onDecision, decider: { ...base, decide: async (q) => ((a) => (a.decided && q.kind === 'never' ? { ...a, probability: p } : a))(await base.decide(q)) } });
      },
    },
    prepare: async (sop, d) => {
      await sop.queries.pushHead('luigis', fixtureFolder());
      await sop.queries.publish('luigis');
      const ids: string[] = [];
      for (const [i, p] of [0.91, 0.92, 0.93, 0.98, 0.99].entries()) ids.push((await sop.queries.receiveSession('luigis', { ...fixture, external_id: `call-8#${i}@${p}` })).id);
      await eventually(
        () => d.query<{ n: number }>(`SELECT (SELECT count(*) FROM sop_sessions WHERE status = 'queued') + (SELECT count(*) FROM sop_findings WHERE pattern_id IS NULL) AS n`),
        (waiting) => Number(waiting.rows[0].n) === 0,
        'sessions still queued',
        500,
      );
      const findings = (await Promise.all(ids.map((id) => sop.queries.getSession('luigis', id)))).map((v) => v.checks.flatMap((c) => c.rules).find((r) => r.finding)!);
      await sop.review.giveVerdict('luigis', findings[0].pattern_id!, { verdict: 'real' });
      for (const f of findings.slice(0, 3)) await sop.review.overrideFinding('luigis', f.finding_id!, { correct: false });
    },
  });
  ({ db, url } = server);
}, 60_000);
afterAll(() => server.close());

const sopops = (args: string[]) => runSopops(args, { NEATROOTS_API_KEY: KEY, NEATROOTS_URL: url });

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
