import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { calibrationChecker, labelForCalibration } from '../../review/src/calibration/labels.test';
import { deployments, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * POST /v1/workspaces/{ws}/calibrate over real HTTP, in both deployments: the api on the
 * review side in its process, and on its gRPC client (neatroots.v1.Sop Calibrate). Five
 * fixture sessions broke the never rule with probabilities 0.91 to 0.99; a reviewer judged
 * the three least sure of them wrong.
 */
const KEY = 'key-for-luigis';

let h: SopHarness;
let db: Db;

beforeAll(async () => {
  h = await startSopHarness({ luigis: KEY }, { checkSession: calibrationChecker });
  db = h.db;
  await labelForCalibration(h.sop, db);
}, 60_000);
afterAll(() => h.close());

describe.each(deployments(() => h))('POST /calibrate (%s)', (_name, _sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await startApiOn(db, 'luigis', h.sop.queries, reviewOf()));
  });
  afterAll(() => app.close());

  const post = async (p: string, body?: unknown, key = KEY) => {
    const { status, body: answer } = await send(`${base}${p}`, 'POST', key, body);
    return { status, body: answer };
  };

  it('answers each procedure with its labels, scores and every rule question before and after; a dry run saves nothing', async () => {
    const r = await post('/calibrate', { procedure: 'take-order', dry_run: true });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['workspace', 'dry_run', 'procedures']);
    expect(r.body).toMatchObject({ workspace: 'luigis', dry_run: true });
    const [take] = r.body.procedures;
    expect(Object.keys(take)).toEqual(['procedure_id', 'labels', 'negative_labels', 'saved', 'skipped', 'score_before', 'score', 'rules']);
    expect(take).toMatchObject({ procedure_id: 'take-order', labels: 5, negative_labels: 3, saved: false, skipped: null, score_before: 0.4, score: 1 });
    const never = take.rules.find((x: { kind: string }) => x.kind === 'never');
    expect(Object.keys(never)).toEqual(['rule_id', 'lineage_id', 'kind', 'index', 'text', 'field', 'before', 'after', 'skipped']);
    expect(never).toMatchObject({ field: 'never', index: 1, before: [0.1, 0.9, 0.5], after: [0.1, 0.955, 0.5], skipped: null });
    expect(take.rules.find((x: { kind: string; index: number }) => x.kind === 'step' && x.index === 1).skipped).toEqual({ code: 'too_few_failures', message: 'its rule has 0 labeled failures; a question is fitted from 3', have: 0, need: 3 });
    expect((await db.query('SELECT 1 FROM sop_calibration_bands')).rows).toHaveLength(0);
  });

  it('without a body fits every procedure of the live release; refusals say which procedure and why', async () => {
    const r = await post('/calibrate');
    expect(r.status).toBe(200);
    expect(r.body.procedures.map((p: { procedure_id: string }) => p.procedure_id)).toEqual(['answer-call', 'card-payment', 'take-order']);
    expect(r.body.procedures[1]).toMatchObject({ saved: false, skipped: { code: 'too_few_labeled_sessions', have: 0, need: 5 } });
    expect(r.body.procedures[2]).toMatchObject({ saved: true, skipped: null });
    expect((await db.query('SELECT band_yes FROM sop_calibration_bands')).rows).toEqual([{ band_yes: 0.955 }]);
    await db.exec('DELETE FROM sop_calibration_bands');
  });

  it('refuses a wrong body and query with 400, naming what is wrong', async () => {
    expect(await post('/calibrate', { dry_run: 'yes' })).toEqual({ status: 400, body: { error: { code: 'invalid_body', message: '"dry_run" must be true or false, got "yes"' } } });
    expect((await post('/calibrate', { rule: 'x' })).body.error.message).toBe('unknown field "rule": the body is {"procedure"?: string, "dry_run"?: boolean}');
    expect((await post('/calibrate', [1])).status).toBe(400);
    expect((await post('/calibrate?dry_run=true', {})).status).toBe(400);
    expect((await post('/calibrate', {}, 'wrong-key')).status).toBe(401);
  });
});
