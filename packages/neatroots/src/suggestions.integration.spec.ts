import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, loadModelConfig } from '@neatroots/platform';
import { startFakeGitHub, type FakeGitHub } from '../../../libs/platform/src/github/fake-github.test';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * Suggestions in the embedded default as `neatroots start` composes it: the local LLM (the
 * local OpenAI-compatible server) standing in for the reasoning model, GitHub connections sealed
 * with the key the app keeps in its data folder, a pull request opened on the local fake GitHub.
 * Only the REST API is used, as a reviewer's client would.
 */
const KEY = 'sug-e2e-key';
const WS = 'shop';
const STEP2 = '2. Issue the refund. [tool: issue_refund, required]';
const REFUND = `# Refund an order
Goal: The customer gets the refund they are owed.

## Steps
1. Look up the order. [tool: lookup_order, required]
${STEP2}
`;
const AGENT = 'instructions: You handle refunds for the shop.\nprocedures: [refund]\n';

function model(call: FakeCall): FakeReply {
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
  if ((call.body.messages[0]?.content ?? '').startsWith('You edit standard operating procedures')) {
    return { json: { answers: ids.map((id) => ({ id, rationale: 'Refund only a looked-up order.', edits: [{ find: STEP2, replace: '2. Issue the refund for the order looked up. [tool: issue_refund, required]' }] })) } };
  }
  // every other decision: yes (the procedure applies, the goal was reached); names: a few words
  return { json: { answers: ids.map((id) => ({ id, p: 0.9, evidence: [], reason: 'yes', name: 'Skipped the lookup' })) } };
}

describe('suggestions in the embedded default', () => {
  let home: string;
  let app: EmbeddedApp;
  let base: string;
  let llm: FakeOpenAI;
  let gh: FakeGitHub;

  const api = async (method: string, p: string, body?: unknown, type = 'application/json') => {
    const res = await fetch(`${base}${p}`, { method, headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': type } : {}) }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : null };
  };
  const until = async (p: string, ok: (b: Record<string, unknown>) => boolean) => {
    for (let i = 0; i < 500; i++) {
      const r = await api('GET', p);
      if (r.status === 200 && ok(r.body)) return r.body;
      await new Promise((res) => setTimeout(res, 20));
    }
    throw new Error(`${p} never got there`);
  };

  beforeAll(async () => {
    llm = await startFakeOpenAI(model);
    gh = await startFakeGitHub();
    gh.addRepo('shop', 'sops', 'main', { 'procedures/refund.md': REFUND });
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-sug-e2e-'));
    app = await startEmbedded({
      // the fake GitHub is on loopback over http: a connection may name it only when the setting does
      config: testConfig(home, { NEATROOTS_API_KEYS: `${WS}=${KEY}`, NEATROOTS_GITHUB_API_URLS: gh.url }),
      inMemoryDb: true,
      watch: false,
      models: loadModelConfig({ NEATROOTS_LLM_URL: llm.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_QUESTION_BATCH_WAIT_MS: '5' }),
      log: createLogger({ level: 'error' }),
    });
    base = `http://127.0.0.1:${app.httpPort}/v1/workspaces/${WS}`;
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await llm?.close();
    await gh?.stop();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('a verdict with suggest: true becomes a proposal, applied as a pull request through the workspace\'s connection', async () => {
    expect((await api('PUT', '/head/procedures/refund.md', REFUND, 'text/markdown')).status).toBe(200);
    expect((await api('PUT', '/head/agents/refunds.yaml', AGENT, 'text/plain')).status).toBe(200);
    expect((await api('POST', '/releases')).status).toBe(201);
    const sent = await api('POST', '/sessions', {
      external_id: 'r-1',
      agent: 'refunds',
      turns: [{ role: 'user', text: 'Refund order 7.' }, { role: 'agent', text: 'Refunded.' }],
      tool_calls: [{ turn: 1, tool: 'issue_refund', input: { order: 7 } }],
    });
    expect(sent.status).toBe(202);
    await until(`/sessions/${sent.body.id}`, (s) => s.status === 'checked');
    const queue = await until('/review', (q) => (q.items as unknown[]).length > 0);
    const patternId = (queue.items as { pattern_id: string }[])[0].pattern_id;

    // any other address inside the deployment is refused, so a workspace key cannot aim the token there
    for (const other of ['http://127.0.0.1:9464', 'https://10.0.0.7/api/v3', 'https://[::ffff:127.0.0.1]/api', 'https://localhost/api/v3']) {
      const refused = await api('PUT', '/github', { repository: 'shop/sops', api_url: other, token: gh.token });
      expect(refused).toMatchObject({ status: 400, body: { error: { code: 'invalid_body', message: expect.stringContaining(`api_url ${other} is not one this deployment allows`) } } });
    }
    const put = await api('PUT', '/github', { repository: 'shop/sops', path: 'procedures', api_url: gh.url, token: gh.token });
    expect(put).toMatchObject({ status: 200, body: { repository: 'shop/sops', has_token: true } });
    expect(put.text).not.toContain(gh.token);
    // the embedded default made the key the token is sealed with, readable by its owner only
    expect(fs.statSync(path.join(home, 'data', 'secret-key')).mode & 0o777).toBe(0o600);

    const verdict = await api('POST', `/patterns/${patternId}/verdict`, { verdict: 'real', suggest: true });
    expect(verdict.body.suggestion).toMatchObject({ status: 'generating' });
    const s = await until(`/suggestions/${verdict.body.suggestion.id}`, (b) => b.status !== 'generating');
    expect(s).toMatchObject({ status: 'proposed', model: 'llama-test', freshness: 'current' });

    const applied = await api('POST', `/suggestions/${s.id}/apply`, {});
    expect(applied).toMatchObject({ status: 200, body: { status: 'pr_open', pr_url: expect.stringContaining('/shop/sops/pull/1') } });
    expect((await api('GET', `/patterns/${patternId}`)).body).toMatchObject({ review_state: 'fixing' });
  });
});

describe('the embedded default with a damaged secret-key file', () => {
  it('does not start, naming the file (a new key would make every sealed token unreadable)', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-badkey-'));
    try {
      fs.mkdirSync(path.join(home, 'data'), { recursive: true });
      const file = path.join(home, 'data', 'secret-key');
      fs.writeFileSync(file, 'not a key\n', { mode: 0o600 });
      const started = startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${WS}=${KEY}` }), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
      await expect(started).rejects.toThrow(`${file}: not a secret key (expected 64 hex digits); restore it, or set NEATROOTS_SECRET_KEY`);
      expect(fs.readFileSync(file, 'utf8')).toBe('not a key\n'); // left as it was
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
