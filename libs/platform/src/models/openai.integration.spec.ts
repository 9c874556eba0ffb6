import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { failure, startFakeOpenAI, type FakeOpenAI } from './fake-openai.test';
import { loadModelConfig, modelsFromConfig } from './config';
import { openAiChatModel, REASONING_ALLOWANCE_TOKENS } from './openai';

/** The adapter against a real HTTP server speaking the chat-completions API, through the real `openai` client. */
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: 'hello' }));
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.calls.length = 0;
});

function model(timeoutMs = 2_000) {
  return openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs });
}

describe('the OpenAI-compatible model adapter', () => {
  it('sends the messages to the configured model and returns the reply', async () => {
    fake.script = () => ({ json: { ok: true } });
    const res = await model().complete({ messages: [{ role: 'user', content: 'hi' }], json: true, maxTokens: 50 });
    expect(JSON.parse(res.text)).toEqual({ ok: true });
    expect(res.model).toBe('llama-test');
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0].path).toBe('/v1/chat/completions');
    expect(fake.calls[0].body).toMatchObject({ model: 'llama-test', messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' }, max_tokens: 50, temperature: 0 });
  });

  it('the decision model configured with TYPESAFE_API_KEY sends it as its bearer token', async () => {
    fake.script = () => ({ json: { ok: true } });
    const { decision } = modelsFromConfig(loadModelConfig({ NEATROOTS_DECISION_MODEL_URL: fake.url, NEATROOTS_DECISION_MODEL_NAME: 'jev-test', TYPESAFE_API_KEY: 'ts-secret' }));
    await decision!.complete({ messages: [{ role: 'user', content: 'hi' }], json: true });
    expect(fake.calls.at(-1)).toMatchObject({ authorization: 'Bearer ts-secret', body: { model: 'jev-test' } });
  });

  it('a hosted reasoning model set to reasoning params gets max_completion_tokens (with room to think), no temperature; JSON mode per endpoint', async () => {
    fake.script = () => ({ json: { ok: true } });
    const { decision, reasoning } = modelsFromConfig(
      loadModelConfig({
        NEATROOTS_DECISION_MODEL_URL: fake.url,
        NEATROOTS_DECISION_MODEL_NAME: 'dec-m',
        NEATROOTS_DECISION_MODEL_JSON_MODE: 'off',
        NEATROOTS_REASONING_MODEL_URL: fake.url,
        NEATROOTS_REASONING_MODEL_NAME: 'o-test',
        NEATROOTS_REASONING_MODEL_PARAMS: 'reasoning',
      }),
    );
    await reasoning!.complete({ messages: [{ role: 'user', content: 'x' }], json: true, maxTokens: 450 });
    await decision!.complete({ messages: [{ role: 'user', content: 'x' }], json: true, maxTokens: 450 });
    const [r, d] = fake.calls.map((c) => c.body);
    expect(r).toMatchObject({ model: 'o-test', max_completion_tokens: 450 + REASONING_ALLOWANCE_TOKENS, response_format: { type: 'json_object' } });
    expect(r).not.toHaveProperty('max_tokens');
    expect(r).not.toHaveProperty('temperature');
    expect(d).toMatchObject({ model: 'dec-m', max_tokens: 450, temperature: 0 });
    expect(d).not.toHaveProperty('response_format');
    expect(d).not.toHaveProperty('max_completion_tokens');
  });

  it('leaves response_format out when JSON mode is off (servers that reject it)', async () => {
    fake.script = () => ({ content: '{}' });
    await openAiChatModel({ role: 'local', baseURL: fake.url, model: 'm', jsonMode: false }).complete({ messages: [{ role: 'user', content: 'x' }], json: true });
    expect(fake.calls[0].body.response_format).toBeUndefined();
  });

  it('reports a timeout as a timeout, after one request (the queue decides on retries)', async () => {
    fake.script = () => ({ hang: true });
    const err = await failure(model(150).complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.kind).toBe('timeout');
    expect(err.retryable).toBe(false);
    expect(fake.calls).toHaveLength(1);
  });

  it.each([
    [429, 'rate_limited', true],
    [503, 'server', true],
    [400, 'rejected', false],
    [401, 'rejected', false],
  ])('maps HTTP %i to %s', async (status, kind, retryable) => {
    fake.script = () => ({ status });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.kind).toBe(kind);
    expect(err.status).toBe(status);
    expect(err.retryable).toBe(retryable);
    expect(fake.calls).toHaveLength(1);
  });

  it('never keeps the key a server echoes in its error, for any endpoint', async () => {
    // Hosted APIs answer a wrong key with it: "Incorrect API key provided: sk-...". What a
    // ModelError says ends up in not-checked reasons, the API's answers and the logs.
    fake.script = (call) => ({
      status: 401,
      body: JSON.stringify({
        error: { message: `Incorrect API key provided: ${call.authorization?.slice('Bearer '.length)}. You can find your API key at https://platform.example.com/account/api-keys.`, type: 'invalid_request_error', code: 'invalid_api_key' },
      }),
    });
    const { decision, reasoning, local } = modelsFromConfig(
      loadModelConfig({
        NEATROOTS_DECISION_MODEL_URL: fake.url,
        NEATROOTS_DECISION_MODEL_NAME: 'dec-m',
        NEATROOTS_DECISION_MODEL_KEY: 'sk-SECRET-decision-9f8e7d6c',
        NEATROOTS_REASONING_MODEL_URL: fake.url,
        NEATROOTS_REASONING_MODEL_NAME: 'o-test',
        NEATROOTS_REASONING_MODEL_KEY: 'sk-SECRET-reasoning-1a2b3c',
        NEATROOTS_LLM_URL: fake.url,
        NEATROOTS_LLM_MODEL: 'llama-test',
        NEATROOTS_LLM_KEY: 'sk-SECRET-local-4d5e6f7a',
      }),
    );
    const endpoints = [
      [decision!, 'sk-SECRET-decision-9f8e7d6c'],
      [reasoning!, 'sk-SECRET-reasoning-1a2b3c'],
      [local!, 'sk-SECRET-local-4d5e6f7a'],
    ] as const;
    for (const [m, key] of endpoints) {
      const err = await failure(m.complete({ messages: [{ role: 'user', content: 'x' }], json: true }));
      expect(err).toMatchObject({ kind: 'rejected', status: 401, retryable: false });
      expect(err.message).toContain('Incorrect API key provided: [model key].');
      // Everything a log line or an answer could print: the message, the stack and the causes.
      const printed = `${err.message}\n${err.stack}\n${inspect(err, { depth: 10 })}\n${JSON.stringify(err)}`;
      expect(printed).not.toContain(key);
      expect(printed).not.toContain('SECRET');
      expect(err.stack).toContain('[model key]');
    }
    expect(fake.calls.map((c) => c.authorization)).toEqual(endpoints.map(([, key]) => `Bearer ${key}`));
  });

  it('leaves a short key and an error without the key as they are', async () => {
    fake.script = () => ({ status: 401, content: 'Incorrect API key provided: none' });
    const err = await failure(openAiChatModel({ role: 'local', baseURL: fake.url, model: 'm', apiKey: 'none' }).complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.message).toContain('Incorrect API key provided: none');
    fake.script = () => ({ status: 403, content: 'Forbidden for this project' });
    const other = await failure(openAiChatModel({ role: 'local', baseURL: fake.url, model: 'm', apiKey: 'sk-SECRET-long-enough' }).complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(other.message).toContain('Forbidden for this project');
    expect(other.message).not.toContain('[model key]');
  });

  it('says the status once: HTTP 500: upstream 500', async () => {
    fake.script = () => ({ status: 500, content: 'upstream 500' });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err).toMatchObject({ kind: 'server', status: 500, message: 'HTTP 500: upstream 500' });
  });

  it('a server that closes the connection in the middle of its answer is a dropped connection (retried), said so', async () => {
    // Headers and the start of a body, then the socket closed: fetch fails the body with
    // TypeError "terminated", which was recorded as 'the model server: terminated'.
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' });
        res.write('{"id":"c1","choices":[{"message":{"con');
        setTimeout(() => req.socket.destroy(), 20);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const m = openAiChatModel({ role: 'local', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, model: 'm', timeoutMs: 2_000 });
      const err = await failure(m.complete({ messages: [{ role: 'user', content: 'x' }], json: true }));
      expect(err).toMatchObject({ kind: 'connection', message: 'the model server closed the connection before its answer was complete', retryable: true });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('a stream nobody asked for is refused, not retried and not read as the answer', async () => {
    const chunk = { id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '{"answers": []}' } }] };
    fake.script = () => ({ headers: { 'content-type': 'text/event-stream' }, body: `data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n` });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }], json: true }));
    expect(err).toMatchObject({ kind: 'rejected', message: 'the model server answered with a stream, which was not asked for', retryable: false });
    expect(fake.calls).toHaveLength(1);
  });

  it('reports an unreachable endpoint as a connection error', async () => {
    const m = openAiChatModel({ role: 'local', baseURL: 'http://127.0.0.1:9/v1', model: 'm', timeoutMs: 1_000 });
    const err = await failure(m.complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.kind).toBe('connection');
  });

  it.each([
    [{ 'retry-after': '20' }, 20_000],
    [{ 'retry-after-ms': '1500', 'retry-after': '2' }, 1_500],
  ])('keeps the wait a 429 asks for (%j) on the error', async (headers, ms) => {
    fake.script = () => ({ status: 429, content: 'Rate limit reached', headers });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err).toMatchObject({ kind: 'rate_limited', status: 429, retryAfterMs: ms });
  });

  it('a 429 without retry-after has no wait of its own', async () => {
    fake.script = () => ({ status: 429 });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.retryAfterMs).toBeUndefined();
  });

  it('an HTTP 200 carrying an error and no choices is a server error that says what came back', async () => {
    fake.script = () => ({ body: JSON.stringify({ error: { message: 'upstream overloaded' } }) });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.kind).toBe('server');
    expect(err.message).toBe('the server answered HTTP 200 with an error: upstream overloaded');
  });

  it('an HTTP 200 with neither choices nor an error says so', async () => {
    fake.script = () => ({ body: JSON.stringify({ id: 'x', object: 'chat.completion' }) });
    const err = await failure(model().complete({ messages: [{ role: 'user', content: 'x' }] }));
    expect(err.message).toMatch(/^the server answered HTTP 200 with no "choices": \{"id":"x"/);
  });

  it('a reply cut at max_tokens comes back with finish reason length', async () => {
    fake.script = () => ({ content: 'one two six ten red big cat dog' });
    const res = await model().complete({ messages: [{ role: 'user', content: 'x' }], maxTokens: 4 });
    expect(res).toMatchObject({ text: 'one two six ten', finishReason: 'length', usage: { output_tokens: 4 } });
  });

  it('a refusal comes back as the refusal, with no text', async () => {
    fake.script = () => ({ refusal: 'I cannot help with that' });
    const res = await model().complete({ messages: [{ role: 'user', content: 'x' }], json: true });
    expect(res).toMatchObject({ text: '', refusal: 'I cannot help with that', finishReason: 'stop' });
  });
});
