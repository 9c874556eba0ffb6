import * as fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger, loadModelConfig, type ModelConfig } from '@neatroots/platform';
import { createReviewQueries } from '@neatroots/review';
import { judgeReply, parseJudgePrompt, startFakeOpenAI, type FakeCall, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { createAuthoring } from './authoring';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { sendEndedRuns } from './stored-runs.test';
import { jsonApi, tempHome, testConfig } from './test-app.test';

/**
 * A check preview its caller gives up on stops: the REST client that aborts its request, the
 * MCP client whose call times out (the SDK sends notifications/cancelled in another POST).
 * Against a real embedded neatroots whose model never answers the abandoned previews' question:
 * the abandoned previews free their places at once (a third preview starts instead of being
 * refused too_many_previews), their model calls are aborted, and the model gets no call of
 * theirs after that. A preview given a wall-clock bound answers with what it covered, the rest
 * listed as not checked.
 */
const KEY = 'given-up-key';
const PROJECT = 'shop';
const RUNS = ['run-1', 'run-2', 'run-3'];

/** A question about each run's answer; `tag` tells its model calls apart. */
const question = (id: string, tag: string) => `id: ${id}
kind: yes_no
scope: trace
ask: Does the final response promise a callback (${tag})?
evidence: { final_output: true }
when: end
`;

const asks = (call: FakeCall) => (call.kind === 'judge' ? parseJudgePrompt(call).map((q) => q.ask) : []);
/** The model calls asking about `tag`'s question. */
const callsFor = (tag: string) => fake.calls.filter((c) => asks(c).some((a) => a.includes(`(${tag})`)));

let fake: FakeOpenAI;
let home: string;
let app: EmbeddedApp;
let base: string;
let models: ModelConfig;
const api = jsonApi(() => base, KEY);

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The held previews' questions are answered once this is called. */
let release: () => void = () => undefined;
const released = new Promise<void>((r) => (release = r));

beforeAll(async () => {
  // The abandoned previews' questions are never answered, the held ones once released; every
  // other one is, with a "no".
  fake = await startFakeOpenAI(async (call) => {
    if (asks(call).some((a) => a.includes('(abandoned'))) return { hang: true };
    if (asks(call).some((a) => a.includes('(held'))) await released;
    return judgeReply(call, () => ({ p: 0.02 }));
  });
  home = tempHome('neatroots-preview-given-up');
  // One model call at a time: a preview whose call hangs has made exactly one.
  models = loadModelConfig({ NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_LLM_CONCURRENCY: '1', NEATROOTS_QUESTION_BATCH_WAIT_MS: '5' });
  app = await startEmbedded({
    config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }),
    inMemoryDb: true,
    watch: false,
    models,
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
  await sendEndedRuns(app, PROJECT, KEY, RUNS);
  await app.questions.idle();
}, 120_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('a preview its caller gives up on', () => {
  it('REST: a client that aborts frees the place at once, and its model calls stop', async () => {
    const given = [1, 2].map((i) => {
      const ac = new AbortController();
      const res = fetch(`${base}/v1/projects/${PROJECT}/checks/preview`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ yaml: question(`rest-${i}`, `abandoned rest ${i}`), runs: 3, model_calls: 6 }),
        signal: ac.signal,
      }).catch((e: Error) => e);
      return { ac, res, tag: `abandoned rest ${i}` };
    });
    // Both are running, each waiting for the model.
    await until('both previews at the model', () => given.every((g) => callsFor(g.tag).length === 1) && fake.open >= 2);
    for (const g of given) g.ac.abort();
    for (const g of given) expect(await g.res).toMatchObject({ name: 'AbortError' });
    // The server aborted their model calls (the fake sees the requests closed)...
    await until('the abandoned model calls closed', () => fake.open === 0);

    // ...and their places are free: a third preview runs (it would be refused too_many_previews).
    const third = await api<{ runs: { checked: number }; not_checked: unknown[] }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: question('rest-3', 'answered rest'), runs: 3 });
    expect(third.status).toBe(200);
    expect(third.body).toMatchObject({ runs: { checked: 3 }, not_checked: [] });
    expect(callsFor('answered rest').length).toBeGreaterThan(0);
    // No call of the abandoned previews reached the model after the abort.
    expect(given.map((g) => callsFor(g.tag).length)).toEqual([1, 1]);
  });

  it('MCP: a call the SDK client times out on (notifications/cancelled) frees the place, and its model calls stop', async () => {
    // The client's fetch, to know when the server has taken each cancellation (its 202).
    const cancelsTaken: unknown[] = [];
    const watched: typeof fetch = async (url, init) => {
      const res = await fetch(url, init);
      if (typeof init?.body === 'string' && init.body.includes('"notifications/cancelled"')) cancelsTaken.push(res.status);
      return res;
    };
    const client = new Client({ name: 'given-up', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } }, fetch: watched }));
    try {
      for (const i of [1, 2]) {
        await expect(
          client.callTool({ name: 'preview_check', arguments: { yaml: question(`mcp-${i}`, `abandoned mcp ${i}`), runs: 3, model_calls: 6 } }, undefined, { timeout: 3000 }),
        ).rejects.toThrow(/Request timed out/);
      }
      await until('both cancellations taken', () => cancelsTaken.length === 2);
      expect(cancelsTaken).toEqual([202, 202]);
      await until('the abandoned model calls closed', () => fake.open === 0);
      // At most the one call each had made when it was cancelled (one at a time; none if cancelled before it asked).
      const asked = [1, 2].map((i) => callsFor(`abandoned mcp ${i}`).length);
      expect(Math.max(...asked)).toBeLessThanOrEqual(1);

      const third = (await client.callTool({ name: 'preview_check', arguments: { yaml: question('mcp-3', 'answered mcp'), runs: 3 } })) as { isError?: boolean; content: { text: string }[] };
      expect(third.isError).toBeFalsy();
      expect(JSON.parse(third.content[0].text)).toMatchObject({ runs: { checked: 3 }, not_checked: [] });
      expect([1, 2].map((i) => callsFor(`abandoned mcp ${i}`).length)).toEqual(asked);
    } finally {
      await client.close();
    }
  });

  it("MCP: another client's cancellation of the same request id stops nothing; the call's own client's still does", async () => {
    // Two clients of the project with the same key, from the same address (as every stdio relay
    // on a machine, or every client behind an ingress): each numbers its requests from 0.
    // What the clients post (as sent), and the status of each once answered.
    const posted: { body: { id?: number; method?: string }; session: string | null; status?: number }[] = [];
    const watched: typeof fetch = async (url, init) => {
      const sent = typeof init?.body === 'string' ? { body: JSON.parse(init.body), session: new Headers(init.headers).get('mcp-session-id') } : undefined;
      if (sent) posted.push(sent);
      const res = await fetch(url, init);
      if (sent) Object.assign(sent, { status: res.status });
      return res;
    };
    const connect = async (name: string) => {
      const c = new Client({ name, version: '1.0.0' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } }, fetch: watched }));
      return c;
    };
    const a = await connect('agent-a');
    const b = await connect('agent-b');
    try {
      // A's preview, held at the model.
      const held = a.callTool({ name: 'preview_check', arguments: { yaml: question('held-a', 'held a'), runs: 3 } });
      await until("A's preview at the model", () => callsFor('held a').length === 1);
      const call = posted.find((p) => p.body.method === 'tools/call')!;
      // Each client was given a session of its own at initialize, and sends it.
      expect(call.session).toMatch(/^[0-9a-f-]{36}$/);
      const sessions = posted.filter((p) => p.body.method === 'notifications/initialized').map((p) => p.session);
      expect(new Set(sessions).size).toBe(2);

      // B gives up on "its" request with A's id; a client that sends no session id does too.
      const taken = posted.length;
      await b.notification({ method: 'notifications/cancelled', params: { requestId: call.body.id!, reason: "B's own call timed out" } });
      expect(posted[taken].body).toMatchObject({ method: 'notifications/cancelled' });
      const bare = await fetch(`${base}/v1/mcp`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: call.body.id, reason: 'gave up' } }),
      });
      expect([posted[taken].status, bare.status]).toEqual([202, 202]);

      // A's preview was not stopped: released, it answers in full.
      release();
      const r = (await held) as { isError?: boolean; content: { text: string }[] };
      expect(r.content[0].text).not.toMatch(/cancelled/);
      expect(r.isError).toBeFalsy();
      expect(JSON.parse(r.content[0].text)).toMatchObject({ runs: { checked: 3 }, not_checked: [] });

      // A's own cancellation (its session) still stops its call.
      const ac = new AbortController();
      const own = a.callTool({ name: 'preview_check', arguments: { yaml: question('abandoned-a', 'abandoned a'), runs: 3, model_calls: 6 } }, undefined, { signal: ac.signal });
      await until("A's second preview at the model", () => callsFor('abandoned a').length === 1 && fake.open === 1);
      ac.abort('A gave up');
      await expect(own).rejects.toThrow();
      await until("A's cancelled preview's model call closed", () => fake.open === 0);
      expect(callsFor('abandoned a')).toHaveLength(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('answers within its wall-clock bound with what it covered, the rest not checked', async () => {
    const authoring = createAuthoring({
      data: { checkRecords: async () => [], putCheck: async () => undefined, deleteCheck: async () => false },
      queries: createReviewQueries(app.db),
      checks: { loaded: () => app.checks(), reload: async () => undefined },
      models,
    });
    const r = await authoring.preview(PROJECT, { yaml: question('bounded', 'abandoned bounded') }, { by: 'agent', runs: 3, time_ms: 1500 });
    expect(r.flagged).toEqual([]);
    expect(r.not_checked.map((n) => n.run_id).sort()).toEqual(RUNS);
    for (const n of r.not_checked) expect(n.reason).toMatch(/the preview's time \(1\.5 s\) ran out/);
    expect(r.bounds).toMatch(/stopped at its 1\.5 s bound/);
    await until('the bounded preview\'s model call closed', () => fake.open === 0);
  });

  it('a preview whose caller gives up stops with no model call after it, and frees its place', async () => {
    const authoring = createAuthoring({
      data: { checkRecords: async () => [], putCheck: async () => undefined, deleteCheck: async () => false },
      queries: createReviewQueries(app.db),
      checks: { loaded: () => app.checks(), reload: async () => undefined },
      models,
      previewsAtOnce: 1,
    });
    const ac = new AbortController();
    const given = authoring.preview(PROJECT, { yaml: question('direct', 'abandoned direct') }, { by: 'app', runs: 3, model_calls: 6, signal: ac.signal });
    await until('the preview at the model', () => callsFor('abandoned direct').length > 0);
    ac.abort();
    // Its place is free at once.
    const next = authoring.preview(PROJECT, { yaml: question('direct-2', 'answered direct') }, { by: 'app', runs: 3 });
    await expect(given).rejects.toMatchObject({ status: 499, code: 'cancelled' });
    // The preview has ended: the one call it had made (aborted), none after.
    expect(callsFor('abandoned direct')).toHaveLength(1);
    expect((await next).runs.checked).toBe(3);
  });
});
