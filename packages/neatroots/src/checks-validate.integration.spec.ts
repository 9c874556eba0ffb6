import * as fs from 'node:fs';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { jsonApi, REFUND_HALT_CHECK, REFUND_LOOKUP_RULE, tempHome, testConfig } from './test-app.test';

/**
 * POST checks/validate, against a real embedded neatroots (in-memory database): it answers
 * exactly what POST checks would (the same refusals, field and line included) and saves
 * nothing, so the app can validate as a person types.
 */
const KEY = 'validate-key';
const PROJECT = 'shop';

const RULE = REFUND_LOOKUP_RULE;

let home: string;
let app: EmbeddedApp;
let base: string;

interface Answer {
  status: number;
  body: { check_id?: string; warnings?: string[]; error?: { code: string; message: string; problems?: { field: string; line?: number; reason: string }[] }; checks?: { id: string }[] };
}

const call = jsonApi(() => base, KEY);
const api = (method: string, p: string, body?: unknown): Promise<Answer> => call<Answer['body']>(method, `/v1/projects/${PROJECT}${p}`, body);

/** validate and save answer the same refusal for the same body. */
async function bothRefuse(body: Record<string, unknown>): Promise<Answer> {
  const v = await api('POST', '/checks/validate', body);
  const s = await api('POST', '/checks', body);
  expect(v.status).toBeGreaterThanOrEqual(400);
  expect(v).toEqual(s);
  return v;
}

beforeAll(async () => {
  home = tempHome('neatroots-validate', { 'halt.yaml': REFUND_HALT_CHECK });
  app = await startEmbedded({
    config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }),
    inMemoryDb: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
}, 120_000);

afterAll(async () => {
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('POST checks/validate', () => {
  it('accepts what save accepts, with its id and warnings, and saves nothing', async () => {
    const v = await api('POST', '/checks/validate', { yaml: RULE });
    expect(v).toEqual({ status: 200, body: { check_id: 'refund-needs-lookup', warnings: [] } });
    expect((await api('GET', '/checks/refund-needs-lookup')).status).toBe(404);
    expect((await api('GET', '/checks')).body.checks!.map((c) => c.id)).not.toContain('refund-needs-lookup');
    // A check given as an object validates the same way.
    const obj = await api('POST', '/checks/validate', { check: { id: 'lookup-before-delete', kind: 'rule', rule: { type: 'requires_before', call: { tool: ['delete_account'] }, requires: { tool: ['lookup_account'] } } } });
    expect(obj).toMatchObject({ status: 200, body: { check_id: 'lookup-before-delete' } });
  });

  it('refuses an invalid check as save does: 400 invalid_check, each problem at its field and line', async () => {
    const r = await bothRefuse({ yaml: RULE.replace('type: requires_before', 'type: requires_befor') });
    expect(r.status).toBe(400);
    expect(r.body.error!.code).toBe('invalid_check');
    expect(r.body.error!.problems).toEqual([expect.objectContaining({ field: 'rule.type', line: 6 })]);
  });

  it('refuses the rest save refuses: another project, a reserved id and your halt rule in a file', async () => {
    const other = await bothRefuse({ yaml: `${RULE}applies_to: { project: [elsewhere] }\n` });
    expect(other.body.error!.problems![0].field).toBe('applies_to.project');
    const reserved = await bothRefuse({ yaml: RULE.replace('id: refund-needs-lookup', 'id: validate') });
    expect(reserved.body.error!.problems![0]).toMatchObject({ field: 'id' });
    const halt = await bothRefuse({ yaml: REFUND_HALT_CHECK.replace('action: halt\n', '') });
    expect(halt).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });
    expect(await api('POST', '/checks/validate', { yaml: RULE, by: 'nobody' })).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
    expect(await api('POST', '/checks/validate', { yaml: RULE, runs: 3 })).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/unknown field runs/) } } });
  });
});
