import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost } from '@neatroots/platform';
import { GitHubConnections, type Sop } from '@neatroots/review';
import { startFakeGitHub, type FakeGitHub } from '../../../libs/platform/src/github/fake-github.test';
import type { FakeCall, FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { conforms } from './openapi/conforms.test';
import { deployments, fakeReasoning, fixtureFolder, fixtureSession, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * The suggestion endpoints and the GitHub connection over real HTTP, through the api's module
 * (guard, body parser, error filter), in both deployments: the review service in-process, and
 * over gRPC (neatroots.v1.Sop). The model is the local OpenAI-compatible server through the
 * question service's answerer; pull requests go to the local fake GitHub.
 */
const KEY = 'key-for-luigis';
const session = fixtureSession;
const folder = fixtureFolder();
const RECEIPT = '3. Email the receipt. [tool: send_receipt, required]';
const EDIT = { rationale: 'Say why the receipt matters.', edits: [{ find: RECEIPT, replace: '3. Email the receipt, even when the caller says they do not need one. [tool: send_receipt, required]' }] };

let h: SopHarness;
let db: Db;
let sop: Sop;
let reasoning: Awaited<ReturnType<typeof fakeReasoning>>;
let gh: FakeGitHub;

function model(call: FakeCall): FakeReply {
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
  const suggest = (call.body.messages[0]?.content ?? '').startsWith('You edit standard operating procedures');
  return { json: { answers: ids.map((id) => (suggest ? { id, ...EDIT } : { id, name: 'Skipped the receipt' })) } };
}

beforeAll(async () => {
  reasoning = await fakeReasoning(model);
  const { gateway } = reasoning;
  gh = await startFakeGitHub();
  gh.addRepo('luigis', 'ops', 'main', { 'procedures/card-payment.md': folder.find((f) => f.path === 'procedures/card-payment.md')!.text });
  h = await startSopHarness({ luigis: KEY }, (d) => ({
    gateway: async () => gateway,
    github: new GitHubConnections(d, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10 })),
    prStatusCron: null,
  }));
  ({ db, sop } = h);
}, 60_000);
afterAll(async () => {
  await h.close();
  await reasoning.close();
  await gh.stop();
});

describe.each(deployments(() => h))('suggestions over HTTP (%s)', (_name, _sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    await db.exec('TRUNCATE sop_suggestions, sop_repo_connections, sop_overrides, sop_verdicts, sop_patterns, sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files CASCADE');
    await sop.queries.pushHead('luigis', folder);
    await sop.queries.publish('luigis');
    ({ app, base } = await startApiOn(db, 'luigis', sop.queries, reviewOf(), { logger: false, appDir: null }));
  });
  afterAll(() => app.close());

  const call = async (method: string, p: string, body?: unknown) => {
    const { status, text, body: answer } = await send(`${base}${p}`, method, KEY, body);
    return { status, text, body: answer };
  };

  async function patternId(): Promise<string> {
    await sop.queries.receiveSession('luigis', { ...session('payment-skipped'), external_id: 'pay-a' });
    for (let i = 0; i < 400; i++) {
      const items = (await call('GET', '/review')).body.items;
      if (items.length) return items[0].pattern_id;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('no pattern');
  }

  async function settled(id: string) {
    for (let i = 0; i < 400; i++) {
      const s = await call('GET', `/suggestions/${id}`);
      if (s.body.status !== 'generating') return s;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`${id} still generating`);
  }

  /** Problems of an answer against the OpenAPI document's Suggestion schema (none: it is described as it is). */
  async function undescribed(answers: unknown[]): Promise<string[]> {
    const doc = (await (await fetch(`${base.replace(/\/v1\/.*$/, '')}/openapi.json`)).json()) as { components: { schemas: Record<string, Record<string, unknown>> } };
    return answers.flatMap((a) => conforms(a, { $ref: '#/components/schemas/Suggestion' }, doc.components.schemas));
  }

  it('suggest (409 without a verdict that has one), the verdict with suggest: true, list, get, dismiss, rewrite; refusals name the field', async () => {
    const id = await patternId();
    const refused = await call('POST', `/patterns/${id}/suggest`, {});
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'no_suggestion_for_verdict' } } });

    const verdict = await call('POST', `/patterns/${id}/verdict`, { verdict: 'sop_wrong', note: 'Receipts matter.', suggest: true });
    expect(verdict.status).toBe(201);
    expect(verdict.body.suggestion).toMatchObject({ status: 'generating', verdict: 'sop_wrong' });
    const first = await settled(verdict.body.suggestion.id);
    expect(first.body).toMatchObject({ status: 'proposed', freshness: 'current', since_written: { state: 'current' }, plan: { agents: [{ agent: 'payments-bot', added: 1, removed: 1 }] } });

    const second = await call('POST', `/patterns/${id}/suggest`, { reviewer: 'ana' });
    expect(second).toMatchObject({ status: 202, body: { status: 'generating', reviewer: 'ana' } });
    await settled(second.body.id);
    const list = await call('GET', '/suggestions?status=proposed');
    expect(list.body.items.map((s: { id: string }) => s.id)).toEqual([second.body.id, first.body.id]);
    expect((await call('GET', '/suggestions?status=nope')).status).toBe(400);

    expect(await call('POST', `/suggestions/${first.body.id}/dismiss`, { note: 'One is enough.' })).toMatchObject({ status: 200, body: { status: 'dismissed', note: 'One is enough.' } });
    expect(await call('POST', `/suggestions/${first.body.id}/dismiss`, {})).toMatchObject({ status: 409 });
    expect(await call('POST', `/suggestions/${second.body.id}/apply`, { reviewr: 'x' })).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('unknown field reviewr') } } });

    const rewritten = await call('POST', `/suggestions/${second.body.id}/rewrite`, {});
    expect(rewritten).toMatchObject({ status: 202, body: { status: 'generating', prompt_version: 'suggest-2', rewrite_of: second.body.id } });
    expect((await call('GET', `/suggestions/${second.body.id}`)).body).toMatchObject({ status: 'dismissed', note: 'Rewritten against the current text.', rewritten_as: rewritten.body.id });
    expect((await call('GET', '/suggestions/sug_nope')).status).toBe(404);
    const done = await settled(rewritten.body.id);
    expect(await undescribed([first.body, done.body, rewritten.body, ...(await call('GET', '/suggestions')).body.items])).toEqual([]);
  });

  it('the GitHub connection (token never answered) and apply as a pull request; the pattern shows fixing', async () => {
    const id = (await call('GET', '/review?state=open')).body.items[0]?.pattern_id ?? (await patternId());
    const put = await call('PUT', '/github', { repository: 'luigis/ops', path: 'procedures', api_url: gh.url, token: gh.token });
    expect(put).toMatchObject({ status: 200, body: { repository: 'luigis/ops', has_token: true } });
    expect(put.text).not.toContain(gh.token);
    expect((await call('GET', '/github')).text).not.toContain(gh.token);

    const s = (await call('GET', '/suggestions?status=proposed')).body.items[0];
    const applied = await call('POST', `/suggestions/${s.id}/apply`, { reviewer: 'bo' });
    expect(applied).toMatchObject({ status: 200, body: { status: 'pr_open', pr_url: expect.stringContaining('/luigis/ops/pull/') } });
    expect((await call('GET', `/patterns/${id}`)).body).toMatchObject({ review_state: 'fixing', suggestions: expect.arrayContaining([expect.objectContaining({ id: s.id, status: 'pr_open' })]) });
    expect(await call('POST', `/suggestions/${s.id}/apply`, {})).toMatchObject({ status: 409, body: { error: { code: 'not_proposed' } } });

    // Merged on GitHub: the pattern page, read once the last look is a minute old, sees it.
    gh.merge('luigis', 'ops', Number(applied.body.pr_url.split('/').pop()));
    expect((await call('GET', `/patterns/${id}`)).body.suggestions.find((x: { id: string }) => x.id === s.id).status).toBe('pr_open');
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    const after = await call('GET', `/patterns/${id}`);
    expect(after.body.suggestions.find((x: { id: string }) => x.id === s.id)).toMatchObject({ status: 'merged', merged_at: expect.any(String) });
    expect((await call('DELETE', '/github')).body).toEqual({ deleted: true });
  });
});
