import type { Db } from '@neatroots/ports';
import { PatternsRepo } from '@neatroots/store';
import { fakeReasoning } from '../../../services/api/src/sop-harness.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops patterns rename` against a running server whose question service asks a local
 * OpenAI-compatible server (or, switched off, no model at all).
 */
const KEY = 'luigis-key';
let db: Db;
let server: SopopsServer;
let url: string;
let reasoning: Awaited<ReturnType<typeof fakeReasoning>>;
let modelOn = true;
const repo = new PatternsRepo();

beforeAll(async () => {
  // Every name question answered "Quoted prices unprompted".
  reasoning = await fakeReasoning(
    (call) => {
      const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
      return { json: { answers: [...user.matchAll(/^(q\d+) /gm)].map((m) => ({ id: m[1], name: 'Quoted prices unprompted' })) } };
    },
    { timeoutMs: 1_000, maxWaitMs: 20 },
  );
  server = await startSopopsServer('luigis', KEY, { sop: { gateway: async () => (modelOn ? reasoning.gateway : null) } });
  ({ db, url } = server);
}, 60_000);
afterAll(async () => {
  await server.close();
  await reasoning.close();
});

const sopops = (args: string[]) => runSopops(args, { NEATROOTS_API_KEY: KEY });

const rulePattern = (id: string, rule: string) =>
  repo.insertRulePattern(db, { id, workspace: 'luigis', procedure_id: 'take-order', procedure_name: 'Take an order', lineage_id: rule, name: 'Volunteer a price', rule_id: rule, rule_kind: 'never', rule_index: 1, rule_text: `Volunteer a price (${rule}).`, rule_ran_at: '2026-11-01T00:00:00.000Z' });
const named = async (id: string) => (await repo.pattern(db, 'luigis', id))?.named_by;

describe('sopops patterns rename', () => {
  it('without a model says the patterns keep their names, and exits 1', async () => {
    modelOn = false;
    await rulePattern('pat_1', 'r1');
    const r = await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url]);
    expect(r).toMatchObject({ code: 1, out: ['renamed 0 patterns in luigis'] });
    expect(r.err).toEqual(['sopops patterns rename: 1 pattern kept its name: no reasoning model is configured: the patterns keep the names taken from their rules']);
    expect(await named('pat_1')).toBe('rule_text');
  });

  it('with the reasoning model names what is still named from its rule, then nothing is left; --all asks again', async () => {
    modelOn = true;
    await rulePattern('pat_2', 'r2');
    expect(await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url])).toEqual({ code: 0, out: ['renamed 2 patterns in luigis'], err: [] });
    expect((await repo.pattern(db, 'luigis', 'pat_2'))?.name).toBe('Quoted prices unprompted');
    expect(await named('pat_1')).toBe('model');
    expect((await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url])).out[0]).toMatch(/^nothing to rename in luigis/);
    expect(await sopops(['patterns', 'rename', '--all', '--workspace', 'luigis', '--url', url])).toMatchObject({ code: 0, out: ['renamed 2 patterns in luigis'] });
  });

  it('refuses a missing or unknown patterns command', async () => {
    expect((await sopops(['patterns', '--workspace', 'luigis', '--url', url])).code).toBe(2);
    const r = await sopops(['patterns', 'frob', '--workspace', 'luigis', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toContain('unknown patterns command: frob');
  });
});
