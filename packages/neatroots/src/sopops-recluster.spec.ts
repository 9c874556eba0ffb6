import type { Db } from '@neatroots/ports';
import { PatternsRepo, SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { fakeReasoning } from '../../../services/api/src/sop-harness.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops recluster` against a running server whose question service asks a local
 * OpenAI-compatible server (or, switched off, no model at all).
 */
const KEY = 'luigis-key';
let db: Db;
let server: SopopsServer;
let url: string;
let model: Awaited<ReturnType<typeof fakeReasoning>>;
let modelOn = false;
const repo = new PatternsRepo();

beforeAll(async () => {
  // Splits by the first word of each finding's quote; one theme for every pattern; names them.
  model = await fakeReasoning(
    (call) => {
      const sys = call.body.messages[0].content;
      const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
      const ids = [...user.matchAll(/^(q\d+) /gm)].map((m) => m[1]);
      if (sys.startsWith('You group the findings of one rule')) {
        const of = (w: string) => [...user.matchAll(new RegExp(`^- (\\S+): ${w}`, 'gm'))].map((m) => m[1]);
        return { json: { answers: ids.map((id) => ({ id, failure_modes: [{ name: 'Quoted a price', findings: of('price') }, { name: 'Described a dish', findings: of('dish') }] })) } };
      }
      if (sys.startsWith('You group the mistakes')) return { json: { answers: ids.map((id) => ({ id, themes: [{ name: 'Taking the order', patterns: [...user.matchAll(/^- (p\d+):/gm)].map((m) => m[1]) }] })) } };
      return { json: { answers: ids.map((id) => ({ id, name: 'Talked about prices' })) } };
    },
    { maxWaitMs: 10 },
  );
  server = await startSopopsServer('luigis', KEY, { sop: { gateway: async () => (modelOn ? model.gateway : null) } });
  ({ db, url } = server);
  // 9 checked sessions, each with a finding on one never rule (stored directly: no check needed).
  const sessions = new SopSessionsRepo(db);
  for (let i = 1; i <= 9; i++) {
    const words = i <= 5 ? `price ${i}` : `dish ${i}`;
    const r = await sessions.receive('luigis', { external_id: `call-${i}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: words }], tool_calls: [] });
    await sessions.saveOutcome(r.id, r.content_hash, {
      release_id: null,
      result: 'deviated',
      checked_result: 'deviated',
      checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }],
      findings: [{ id: sopFindingId(r.id, 'take-order', 'never-price'), procedure_id: 'take-order', rule_id: 'never-price', kind: 'never', index: 1, text: 'Volunteer a price.', status: 'violated', evidence: [{ turn: 0, quote: words, source: 'transcript' }], reason: null }],
    });
  }
}, 60_000);
afterAll(async () => {
  await server.close();
  await model.close();
});

const sopops = (args: string[]) => runSopops(args, { NEATROOTS_API_KEY: KEY });

describe('sopops recluster', () => {
  it('without a model assigns what waits, says the rule stays whole, and exits 1', async () => {
    const r = await sopops(['recluster', '--workspace', 'luigis', '--url', url]);
    expect(r).toEqual({
      code: 1,
      out: ['luigis: assigned 9 findings, split 0 rules into failure modes, grouped the themes of 0 procedures'],
      err: ['sopops recluster: no reasoning model is configured: 1 rule due for a split stays whole, and themes were not grouped'],
    });
    expect((await repo.patternsOf(db, 'luigis')).map((p) => [p.kind, p.name, p.named_by])).toEqual([['rule', 'Volunteer a price', 'rule_text']]);
  });

  it('with the reasoning model splits the rule and groups its procedure, then exits 0', async () => {
    modelOn = true;
    const r = await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--procedure', 'take-order', '--rule', 'never-price', '--force']);
    expect(r).toEqual({ code: 0, out: ['luigis: assigned 0 findings, split 1 rule into failure modes, grouped the themes of 1 procedure'], err: [] });
    const patterns = await repo.patternsOf(db, 'luigis');
    expect(patterns.filter((p) => p.kind !== 'rule').map((p) => [p.kind, p.name]).sort()).toEqual([
      ['other', 'Other'],
      ['sub', 'Described a dish'],
      ['sub', 'Quoted a price'],
    ]);
    expect(new Set(patterns.map((p) => p.theme_id)).size).toBe(1);
    expect(patterns[0].theme_id).not.toBeNull();
    // The rule pattern was named from its rule's text without a model: this recluster named it.
    expect(patterns.find((p) => p.kind === 'rule')).toMatchObject({ name: 'Talked about prices', named_by: 'model' });
  });

  it('refuses wrong options (exit 2)', async () => {
    expect((await sopops(['recluster', 'now', '--workspace', 'luigis', '--url', url])).code).toBe(2);
    expect((await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--force=yes'])).code).toBe(2);
    expect((await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--rule'])).code).toBe(2);
  });

  it('refuses a procedure or rule the workspace does not know (a typo in a cron job), naming it: 404, exit 1, nothing done', async () => {
    const recluster = `POST ${url}/v1/workspaces/luigis/patterns/recluster: 404 not_in_release`;
    const none = 'in none of its releases, findings or patterns: nothing to recluster';
    expect(await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--procedure', 'nope'])).toEqual({
      code: 1,
      out: [],
      err: [`sopops recluster: ${recluster}: no procedure nope in workspace luigis: it is ${none}`],
    });
    expect(await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--rule', 'nope'])).toEqual({
      code: 1,
      out: [],
      err: [`sopops recluster: ${recluster}: no rule nope in workspace luigis: it is ${none}`],
    });
    // The procedure is named first, with a rule the workspace knows.
    expect(await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--procedure', 'nope', '--rule', 'never-price'])).toMatchObject({
      code: 1,
      err: [`sopops recluster: ${recluster}: no procedure nope in workspace luigis: it is ${none}`],
    });
    // Known ones still run.
    expect(await sopops(['recluster', '--workspace', 'luigis', '--url', url, '--procedure', 'take-order', '--rule', 'never-price'])).toMatchObject({ code: 0 });
  });
});
