import type { INestApplication } from '@nestjs/common';
import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { createCheckSession, type DecisionGateway } from '@neatroots/sop';
// The local OpenAI-compatible server is a test helper: the platform package does not export it.
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { deployments, fixtureSession, send, startPublishedApi, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * A session checked while the model fails, as a user sees it through the api: the check is
 * tried again; when the tries run out its rules the model decides are `not_checked` and the
 * session says why in `error`; once the model is back, sending the same session again checks it
 * again (it used to answer `unchanged` for good), and so does POST …/sessions/{id}/recheck, the
 * way to check again a session nobody can send (one made from a run). The same answers
 * in-process and over gRPC (neatroots.v1.Sop RecheckSession).
 */
const KEY = 'key-for-rechecks';
const OTHER = 'key-for-someone-else';

let h: SopHarness;
let model: FakeOpenAI;
let answerer: QuestionAnswerer;
/** What the model answers now: 500s while it is down. */
let down = false;

/** Each question of a decide-1 request answered: yes to "was it done", no to "was it broken". */
function answer(call: FakeCall): FakeReply {
  if (down) return { status: 500, content: 'boom' };
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const answers = [...user.matchAll(/^(q\d+) \(about subject S\d+\) (.*)$/gm)].map((m) => ({ id: m[1], p: /break this rule|situation come up/i.test(m[2]) ? 0.02 : 0.95, evidence: [], reason: 'The fake model says so.' }));
  return { json: { answers } };
}

beforeAll(async () => {
  model = await startFakeOpenAI(answer);
  answerer = new QuestionAnswerer({ decision: openAiChatModel({ role: 'decision', baseURL: model.url, model: 'decider-test', timeoutMs: 10_000 }), queue: { maxWaitMs: 5, retries: 0 }, onError: () => undefined });
  const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
  h = await startSopHarness({ luigis: KEY, other: OTHER }, { checkSession: createCheckSession({ gateway }), checkRetry: { attempts: 2, backoffMs: 5 } });
}, 60_000);
afterAll(async () => {
  await h?.close();
  answerer?.close();
  await model?.close();
});

type Rule = { status: string; reason: string };
/** A fixture session of its own (its own words too: the model's answers are cached by what they are about). */
function own(externalId: string) {
  const s = fixtureSession('phone-followed-pickup');
  s.external_id = externalId;
  s.turns[0].text += ` (${externalId})`;
  return s;
}
const notChecked = (body: { checks: { rules: Rule[] }[] }) => body.checks.flatMap((c) => c.rules).filter((r) => r.status === 'not_checked');

describe.each(deployments(() => h))('a session checked while the model fails (%s)', (name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await startPublishedApi(h.db, sopOf(), reviewOf(), KEY));
  });
  afterAll(() => app.close());
  afterEach(() => {
    down = false;
  });

  /** The session once its check is done (up to 30 s: a check tried again waits out its backoff). */
  async function checked(id: string) {
    for (let i = 0; i < 3000; i++) {
      const got = await send(`${base}/sessions/${id}`, 'GET', KEY);
      if (got.body.status !== 'queued') return got.body;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`session ${id} was never checked`);
  }

  it('says why its rules are not checked, and the same session sent again once the model is back is checked again', async () => {
    const session = own(`model-down-${name}`);
    down = true;
    const sent = await send(`${base}/sessions`, 'POST', KEY, session);
    expect(sent).toMatchObject({ status: 202, body: { status: 'queued' } });
    const failed = await checked(sent.body.id);
    expect(failed).toMatchObject({ status: 'checked', result: 'not_measurable', error: expect.stringMatching(/^the model failed on \d+ questions \(the decision model \(decider-test\) could not decide .*: the model answered HTTP 500: boom; and \d+ more\), so their rules are not checked: send the session again, or POST …\/sessions\/ses_\S+\/recheck, once the model is back$/) });
    expect(notChecked(failed).length).toBeGreaterThan(0);
    for (const r of notChecked(failed)) expect(r.reason).toMatch(/^Not checked: the decision model \(decider-test\) could not decide .*: the model answered HTTP 500: boom\.$/);

    // the model back: the same content is queued again (no longer `unchanged`), and checked whole
    down = false;
    expect(await send(`${base}/sessions`, 'POST', KEY, session)).toMatchObject({ status: 202, body: { id: sent.body.id, status: 'queued' } });
    const again = await checked(sent.body.id);
    expect(again).toMatchObject({ status: 'checked', error: null });
    expect(notChecked(again)).toEqual([]);
    // checked whole: sent again, it is unchanged
    expect(await send(`${base}/sessions`, 'POST', KEY, session)).toMatchObject({ status: 202, body: { status: 'unchanged' } });
  });

  it('POST …/sessions/{id}/recheck checks a session again as stored, its results replaced', async () => {
    const session = own(`recheck-${name}`);
    down = true;
    const sent = await send(`${base}/sessions`, 'POST', KEY, session);
    expect(notChecked(await checked(sent.body.id)).length).toBeGreaterThan(0);

    down = false;
    const re = await send(`${base}/sessions/${sent.body.id}/recheck`, 'POST', KEY);
    expect(re).toMatchObject({ status: 202, body: { id: sent.body.id, external_id: session.external_id, status: 'queued' } });
    const again = await checked(sent.body.id);
    expect(again).toMatchObject({ status: 'checked', error: null });
    expect(notChecked(again)).toEqual([]);
  });

  it('recheck: 404 for no such session, 403 with another workspace\'s key, 400 with a query or a body field, 409 once its transcript was let go', async () => {
    expect(await send(`${base}/sessions/nope/recheck`, 'POST', KEY)).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'no session nope in workspace luigis' } } });
    expect((await send(`${base}/sessions/nope/recheck`, 'POST', OTHER)).status).toBe(403);
    expect((await send(`${base}/sessions/nope/recheck?x=1`, 'POST', KEY)).status).toBe(400);
    expect((await send(`${base}/sessions/nope/recheck`, 'POST', KEY, { force: true })).status).toBe(400);

    const sent = await send(`${base}/sessions`, 'POST', KEY, own(`expired-${name}`));
    await checked(sent.body.id);
    await h.db.query(`UPDATE sop_sessions SET transcript_expired_at = now(), body = body || '{"turns":[],"tool_calls":[]}'::jsonb WHERE id = $1`, [sent.body.id]);
    expect(await send(`${base}/sessions/${sent.body.id}/recheck`, 'POST', KEY)).toMatchObject({ status: 409, body: { error: { code: 'transcript_expired', message: expect.stringContaining('send the session again to check it') } } });
  });
});
