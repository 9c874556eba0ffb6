import * as fs from 'node:fs';
import { createLogger, loadModelConfig } from '@neatroots/platform';
import { parseJudgePrompt, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { main, type Io } from './cli';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { sendEndedRuns } from './stored-runs.test';
import { jsonApi, tempHome, testConfig } from './test-app.test';

/**
 * A preview through the REST endpoint (and so the CLI) against a model that never answers, with
 * the model's own timeout at 60 s: it answers 200 within its wall-clock bound (the body's
 * time_ms; 120 s when none), saying in `bounds` that it stopped and listing what it did not
 * check, and it asks about several runs at once (the model takes 8 requests at once). It had
 * no bound: with a 60 s timeout a 10-run preview asked one run at a time, and the CLI gave up
 * after 5 minutes saying the server "may still be working on it" (it had stopped).
 */
const KEY = 'bound-key';
const PROJECT = 'shop';
const RUNS = ['run-1', 'run-2', 'run-3', 'run-4', 'run-5'];
const QUESTION = `id: callback
kind: yes_no
scope: trace
ask: Does the final response promise a callback?
evidence: { final_output: true }
when: end
`;

let fake: FakeOpenAI;
let draftStatus = 401;
let home: string;
let app: EmbeddedApp;
let base: string;
const api = jsonApi(() => base, KEY);

beforeAll(async () => {
  // Every question hangs; a draft is refused (a wrong key) or answered with a bad request.
  fake = await startFakeOpenAI((call) => (call.kind === 'draft' ? { status: draftStatus, content: draftStatus === 401 ? 'Incorrect API key provided' : "Unsupported parameter: 'temperature'" } : { hang: true }));
  home = tempHome('neatroots-preview-bound');
  const models = loadModelConfig({ NEATROOTS_DECISION_MODEL_URL: fake.url, NEATROOTS_DECISION_MODEL_NAME: 'judge-test', NEATROOTS_DECISION_MODEL_TIMEOUT_MS: '60000', NEATROOTS_QUESTION_RETRIES: '0' });
  app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, watch: false, models, log: createLogger({ level: 'error' }) });
  base = `http://127.0.0.1:${app.httpPort}`;
  await sendEndedRuns(app, PROJECT, KEY, RUNS);
}, 120_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** The model calls asking the previewed question (the live app asks the library's of the stored runs too). */
const judging = () => fake.calls.filter((c) => c.kind === 'judge' && parseJudgePrompt(c).some((q) => q.ask.includes('promise a callback'))).length;

describe('a REST preview against a model that never answers', () => {
  it('answers 200 within its time_ms, saying it stopped there, with every run not checked, asking about several runs at once', async () => {
    const asked = judging();
    const r = await api<{ runs: { checked: number }; not_checked: { run_id: string; reason: string }[]; flagged: unknown[]; bounds: string }>(
      'POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: QUESTION, runs: 5, time_ms: 2000 });
    expect(r.status).toBe(200);
    expect(r.body.flagged).toEqual([]);
    expect(r.body.not_checked.map((n) => n.run_id).sort()).toEqual(RUNS);
    for (const n of r.body.not_checked) expect(n.reason).toMatch(/the preview's time \(2 s\) ran out/);
    expect(r.body.bounds).toMatch(/; stopped at its 2 s bound/);
    // Four runs were asked about at once (the model takes 8 requests at once; a preview asks about at most 4 runs).
    expect(judging() - asked).toBe(4);
  }, 60_000);

  it('refuses a time_ms past its bound, naming it', async () => {
    const r = await api<{ error: { code: string; message: string } }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: QUESTION, time_ms: 240_001 });
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({ code: 'invalid_body', message: 'time_ms must be an integer from 1 to 240000' });
  });

  it('a draft the model refused (401, 400) says what to check, not to try again later', async () => {
    const io = (): Io & { lines: string[]; errs: string[] } => {
      const lines: string[] = [];
      const errs: string[] = [];
      return { lines, errs, out: (l) => lines.push(l), err: (l) => errs.push(l), env: { NEATROOTS_URL: base, NEATROOTS_API_KEY: KEY, NEATROOTS_PROJECT: PROJECT }, cwd: home };
    };
    draftStatus = 401;
    const refused = await api<{ error: { code: string; message: string } }>('POST', `/v1/projects/${PROJECT}/checks/draft`, { concern: 'refunds without a lookup' });
    expect(refused.status).toBe(502);
    expect(refused.body.error.message).toMatch(/\(HTTP 401|HTTP 401: Incorrect API key provided/);
    expect(refused.body.error.message).toMatch(/; check the key of the model that drafts \(NEATROOTS_DECISION_MODEL_KEY, or NEATROOTS_LLM_KEY for the local LLM\)/);
    expect(refused.body.error.message).not.toMatch(/try again later/);
    draftStatus = 400;
    const cli = io();
    expect(await main(['checks', 'draft', 'refunds without a lookup'], cli)).toBe(1);
    expect(cli.errs.join('\n')).toMatch(/the model server refused the request as sent: its message says what; check the model's name and how requests are written for it/);
    expect(cli.errs.join('\n')).not.toMatch(/try again later/);
  }, 30_000);
});
