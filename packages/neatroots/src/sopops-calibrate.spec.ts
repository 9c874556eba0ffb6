import type { Db } from '@neatroots/ports';
import { calibrationChecker, labelForCalibration } from '../../../services/review/src/calibration/labels.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops calibrate` against a running server: five fixture sessions broke the never rule with
 * probabilities 0.91 to 0.99, and a reviewer judged the three least sure of them wrong.
 */
const KEY = 'luigis-key';
let db: Db;
let server: SopopsServer;
let url: string;

beforeAll(async () => {
  server = await startSopopsServer('luigis', KEY, { sop: { checkSession: calibrationChecker }, prepare: labelForCalibration });
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
    // An empty --procedure is not "every procedure": refused before anything is calibrated or stored.
    const bands = async () => (await db.query('SELECT procedure_id, band_yes FROM sop_calibration_bands ORDER BY 1, 2')).rows;
    const before = await bands();
    for (const args of [['--procedure', ''], ['--procedure=']]) {
      const empty = await sopops(['calibrate', '--workspace', 'luigis', ...args]);
      expect([args, empty.code, empty.out]).toEqual([args, 2, []]);
      expect(empty.err[0]).toMatch(/^sopops calibrate: --procedure needs a value, got an empty one\nUsage: /);
    }
    expect(await bands()).toEqual(before);
    const bad = await sopops(['calibrate', '--workspace', 'luigis', '--procedure', 'Take Order']);
    expect(bad.code).toBe(1);
    expect(bad.err[0]).toMatch(/^sopops calibrate: POST .*\/calibrate: 400 invalid_body: "procedure" must be a procedure id/);
  });
});
