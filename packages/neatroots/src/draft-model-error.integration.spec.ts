import * as fs from 'node:fs';
import * as net from 'node:net';
import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import { createLogger, loadModelConfig, migrate, openPglite, openAiChatModel } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { startQuestionGrpc, type QuestionGrpc } from '@neatroots/question';
import { QuestionAnswerer } from '@neatroots/questions';
import { createReviewQueries } from '@neatroots/review';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { createAuthoring } from './authoring';
import { questionRemote } from './compose';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * POST .../checks/draft when the model fails: the api answers why (502 model_error with the
 * model's reason, 429 model_busy with Retry-After when the model queue is full, 503 when the
 * question service cannot be reached), never a bare 500. Over real HTTP, against the fake
 * OpenAI-compatible server: in the embedded default (the question service in the api's
 * process), and with the question service in another process over gRPC (the distributed
 * deployment's api).
 */
const KEY = 'draft-errors-key';
const PROJECT = 'shop';
const GOOD_DRAFT: FakeReply = { json: { check: 'rule', id: 'slow-search', title: 'Slow search', rule: { type: 'slow', span: { tool: ['search'] }, at_least_ms: 5000 } } };

let reply: (call: FakeCall) => FakeReply | Promise<FakeReply> = () => GOOD_DRAFT;
let fake: FakeOpenAI;
const closers: (() => unknown)[] = [];

beforeAll(async () => {
  fake = await startFakeOpenAI((call) => (call.kind === 'draft' ? reply(call) : { json: {} }));
});
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await fake?.close();
});
beforeEach(() => {
  reply = () => GOOD_DRAFT;
  fake.calls.length = 0;
});

async function draft(base: string): Promise<{ status: number; retryAfter: string | null; body: { error?: { code: string; message: string }; kind?: string } }> {
  const res = await fetch(`${base}/v1/projects/${PROJECT}/checks/draft`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify({ concern: 'search taking longer than five seconds' }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as never };
}

describe('checks/draft when the model fails, embedded', () => {
  let app: EmbeddedApp;
  let base: string;
  beforeAll(async () => {
    const home = tempHome('neatroots-draft-errors');
    closers.push(() => fs.rmSync(home, { recursive: true, force: true }));
    app = await startEmbedded({
      config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }),
      inMemoryDb: true,
      watch: false,
      // One retry of a 5xx; a model that says nothing for 400 ms has timed out.
      models: loadModelConfig({ NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_LLM_TIMEOUT_MS: '400', NEATROOTS_QUESTION_RETRIES: '1' }),
      log: createLogger({ level: 'error' }),
    });
    closers.push(() => app.close());
    base = `http://127.0.0.1:${app.httpPort}`;
  }, 120_000);

  it('drafts when the model answers', async () => {
    const r = await draft(base);
    expect(r.status).toBe(200);
    expect(r.body.kind).toBe('rule');
  });

  it('a refused key: 502 model_error naming the model\'s answer', async () => {
    reply = () => ({ status: 401, content: 'Incorrect API key provided' });
    const r = await draft(base);
    expect(r.status).toBe(502);
    expect(r.body.error?.code).toBe('model_error');
    // Waiting cannot cure a wrong key: the answer says what to check instead.
    expect(r.body.error?.message).toMatch(/^drafting failed: the model refused the request \(.*401.*Incorrect API key provided.*\); check the key of the model that drafts \(NEATROOTS_DECISION_MODEL_KEY, or NEATROOTS_LLM_KEY for the local LLM\)/);
    expect(r.body.error?.message).not.toMatch(/try again later/);
    expect(fake.calls).toHaveLength(1);
  });

  it('a model that does not answer in time: 502 model_error saying it timed out', async () => {
    reply = () => ({ hang: true });
    const r = await draft(base);
    expect(r.status).toBe(502);
    expect(r.body.error).toEqual({ code: 'model_error', message: 'drafting failed: the model timed out (no answer within 400 ms); try again later, or write the check yourself (docs/checks.md)' });
  });

  it('5xx still failing after the retries: 502 model_error', async () => {
    reply = () => ({ status: 503, content: 'overloaded' });
    const r = await draft(base);
    expect(r.status).toBe(502);
    expect(r.body.error?.code).toBe('model_error');
    expect(r.body.error?.message).toMatch(/^drafting failed: the model failed \(.*503.*overloaded.*\)/);
    expect(fake.calls).toHaveLength(2);
  });
});

describe('checks/draft when the model fails, the question service in another process', () => {
  let db: Db;
  /** What the question service logged: message, and the error passed with it (a stack is printed). */
  const logged: { m: string; e?: unknown }[] = [];

  /** The api's HTTP server drafting through the question service at `address` (gRPC). */
  async function apiOver(address: string): Promise<string> {
    const remote = questionRemote(address, (step) => closers.push(step));
    const unused = () => {
      throw new Error('not used by a draft');
    };
    const authoring = createAuthoring({
      data: { checkRecords: async () => [], putCheck: unused, deleteCheck: unused },
      queries: createReviewQueries(db),
      checks: { loaded: () => ({ checks: [], loaded: [], entries: [], problems: [] }) as never, reload: async () => undefined },
      draft: remote.draft,
    });
    const api: INestApplication = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => (k === KEY ? { project: PROJECT, scope: 'api' } : null), authoring, port: 0, host: '127.0.0.1', logger: false, appDir: null });
    closers.push(() => api.close());
    return apiUrl(api);
  }

  /**
   * A question service whose local LLM's queue holds one request in flight and one waiting; a
   * model that says nothing for `timeoutMs` has timed out.
   */
  async function questionService(timeoutMs = 400): Promise<{ address: string; answerer: QuestionAnswerer }> {
    const answerer = new QuestionAnswerer({
      local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs }),
      queue: { maxWaitMs: 0, retries: 0, maxQueue: 1 },
      localQueue: { maxConcurrent: 1 },
      cache: false,
    });
    const grpc: QuestionGrpc = await startQuestionGrpc(answerer, { port: 0, host: '127.0.0.1', log: (m, e) => logged.push({ m, e }) });
    closers.push(() => answerer.close(), () => grpc.close());
    return { address: `127.0.0.1:${grpc.port}`, answerer };
  }

  let base: string;
  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    closers.push(() => db.close());
    base = await apiOver((await questionService()).address);
  }, 60_000);

  it('a refused key: 502 model_error with the question service\'s reason', async () => {
    reply = () => ({ status: 401, content: 'Incorrect API key provided' });
    const r = await draft(base);
    expect(r.status).toBe(502);
    expect(r.body.error?.code).toBe('model_error');
    expect(r.body.error?.message).toMatch(/^drafting failed: the model failed \(.*401.*Incorrect API key provided.*\); check the key of the model that drafts /);
    // The question service logs the model's failure in one line, not as an unexpected error with a stack.
    expect(logged.map((l) => ({ m: l.m.replace(/\): .*/, '): …'), withError: l.e !== undefined }))).toEqual([{ m: 'a model call failed (rejected, HTTP 401): …', withError: false }]);
  });

  it('a timeout: 502 model_error saying so', async () => {
    reply = () => ({ hang: true });
    const r = await draft(base);
    expect(r.status).toBe(502);
    expect(r.body.error?.message).toMatch(/^drafting failed: the model failed \(no answer within 400 ms\)/);
  });

  it('a full model queue (RESOURCE_EXHAUSTED): 429 model_busy with Retry-After, and the drafts in the queue are answered', async () => {
    // Its own question service: the model holds the drafts until released, and a 400 ms timeout
    // could end the one in flight (502) before the queue is seen full.
    const service = await questionService(60_000);
    const busy = await apiOver(service.address);
    const queue = () => service.answerer.queueStats().local;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    reply = () => held.then(() => GOOD_DRAFT);
    // One request in flight (the model holds it), one waiting: the queue is full.
    const first = draft(busy);
    await until(() => fake.calls.length === 1 && queue().active === 1, 30_000);
    const second = draft(busy);
    await until(() => queue().queued === 1, 30_000);
    const third = await draft(busy);
    expect(third.status).toBe(429);
    expect(third.retryAfter).toBe('5');
    expect(third.body.error?.code).toBe('model_busy');
    expect(third.body.error?.message).toMatch(/^drafting failed: the question service is busy \(the local model queue is full \(1 waiting\); retry later\)$/);
    release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
  }, 90_000);

  it('the question service stopping with the draft in flight (its stop cuts the call after its grace): 503 unavailable, not 500', async () => {
    reply = () => ({ hang: true });
    const answerer = new QuestionAnswerer({ local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 60_000 }), queue: { maxWaitMs: 0, retries: 0 }, cache: false });
    const grpc: QuestionGrpc = await startQuestionGrpc(answerer, { port: 0, host: '127.0.0.1', log: () => undefined });
    closers.push(() => answerer.close(), () => grpc.close(0));
    const url = await apiOver(`127.0.0.1:${grpc.port}`);
    const before = fake.calls.length;
    const pending = draft(url);
    await until(() => fake.calls.length > before);
    await grpc.close(100);
    const r = await pending;
    expect({ status: r.status, retryAfter: r.retryAfter, code: r.body.error?.code }).toEqual({ status: 503, retryAfter: '5', code: 'unavailable' });
    expect(r.body.error?.message).toMatch(/^drafting failed: the question service stopped before the model answered \(.*\); retry$/);
  });

  it('the question service out of reach: 503 unavailable', async () => {
    // A port that was free a moment ago: nothing listens there.
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as net.AddressInfo;
    await new Promise((r) => server.close(r));
    const r = await draft(await apiOver(`127.0.0.1:${port}`));
    expect(r.status).toBe(503);
    expect(r.body.error?.code).toBe('unavailable');
    expect(r.body.error?.message).toMatch(/^drafting failed: the question service cannot be reached/);
  });
});

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}
