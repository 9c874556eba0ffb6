import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { failure } from './fake-openai.test';
import { loadModelConfig, modelsFromConfig } from './config';
import { MIN_REPLY_LIMIT_BYTES, openAiChatModel, replyLimitBytes } from './openai';

/**
 * A model server gone wrong answers megabytes: the adapter reads at most replyLimitBytes of a
 * reply and fails the call, instead of holding the whole reply in memory (one such server made
 * the embedded app refuse most spans for memory).
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const used = () => {
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};

const MB = 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 'x');

type Mode = { kind: 'huge'; bytes: number; declare: boolean } | { kind: 'ok' } | { kind: 'trickle' };
let mode: Mode = { kind: 'ok' };
/** The most heap + external memory seen while the server wrote its reply, less the baseline. */
let peak = 0;
let baseline = 0;
let written = 0;
const sockets = new Set<Socket>();
let connections = 0;
let server: http.Server;
let url: string;

function reply(content: string) {
  return JSON.stringify({ id: 'c1', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] });
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (mode.kind === 'ok') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(reply('{"ok":true}'));
        return;
      }
      if (mode.kind === 'trickle') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"choices":[');
        return; // the rest never comes
      }
      const { bytes, declare } = mode;
      const head = '{"id":"c1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"';
      const tail = '"},"finish_reason":"stop"}]}';
      const body = bytes - head.length - tail.length;
      res.writeHead(200, { 'content-type': 'application/json', ...(declare ? { 'content-length': String(bytes) } : {}) });
      res.write(head);
      let left = body;
      let closed = false;
      res.on('close', () => (closed = true));
      // Written as the client reads (backpressure), one chunk at a time: the memory seen at each
      // write is what the client holds of the reply so far.
      const more = () => {
        while (!closed && left > 0) {
          peak = Math.max(peak, used() - baseline);
          const n = Math.min(left, CHUNK.length);
          left -= n;
          written += n;
          if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
            res.once('drain', more);
            return;
          }
        }
        if (!closed) res.end(tail);
      };
      more();
    });
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => server.close(r));
});

const ask = (maxTokens = 2_200, timeoutMs = 30_000) =>
  openAiChatModel({ role: 'local', baseURL: url, model: 'm', timeoutMs }).complete({ messages: [{ role: 'user', content: 'hi' }], json: true, maxTokens });

describe('the model adapter reads a bounded reply', () => {
  it('the limit is 1 MiB, or 64 bytes a token asked for when that is more', () => {
    expect(replyLimitBytes(undefined)).toBe(MIN_REPLY_LIMIT_BYTES);
    expect(replyLimitBytes(2_200)).toBe(MB);
    expect(replyLimitBytes(32_768)).toBe(2 * MB);
  });

  it.each([
    ['streamed in chunks', false],
    ['with its content-length', true],
  ])('a 50 MB reply (%s) fails the call as a server error naming the limit, and is not held in memory', async (_, declare) => {
    mode = { kind: 'huge', bytes: 50 * MB, declare };
    peak = 0;
    written = 0;
    gc();
    baseline = used();
    const err = await failure(ask());
    gc();
    const after = used() - baseline;
    expect({ kind: err.kind, message: err.message }).toEqual({ kind: 'server', message: `the model's reply is larger than ${MB} bytes` });
    // The server stopped well short of 50 MB: the client closed the connection.
    expect(written).toBeLessThan(20 * MB);
    expect(peak).toBeLessThan(20 * MB);
    expect(after).toBeLessThan(20 * MB);
  });

  it('a normal reply is read, and the connection is kept for the next request', async () => {
    mode = { kind: 'ok' };
    const before = connections;
    const a = await ask();
    const b = await ask();
    expect(JSON.parse(a.text)).toEqual({ ok: true });
    expect(JSON.parse(b.text)).toEqual({ ok: true });
    expect(connections - before).toBeLessThanOrEqual(1);
  });

  it('NEATROOTS_MODEL_REPLY_MAX_BYTES sets the bound: a 2 MB reply is read under 4 MiB, refused under the default, and 512 KB refused under 256 KiB', async () => {
    const local = (env: Record<string, string> = {}) =>
      modelsFromConfig(loadModelConfig({ NEATROOTS_LLM_URL: url, NEATROOTS_LLM_MODEL: 'm', ...env })).local!.complete({ messages: [{ role: 'user', content: 'hi' }], json: true, maxTokens: 2_200 });
    mode = { kind: 'huge', bytes: 2 * MB, declare: false };
    const read = await local({ NEATROOTS_MODEL_REPLY_MAX_BYTES: String(4 * MB) });
    expect(read.text.length).toBeGreaterThan(2 * MB - 1_000);
    const refused = await failure(local());
    expect(refused.message).toBe(`the model's reply is larger than ${MB} bytes`);
    mode = { kind: 'huge', bytes: 512 * 1024, declare: true };
    const small = await failure(local({ NEATROOTS_MODEL_REPLY_MAX_BYTES: '262144' }));
    expect({ kind: small.kind, message: small.message }).toEqual({ kind: 'server', message: "the model's reply is larger than 262144 bytes" });
  });

  it('a reply whose body stops coming still times out', async () => {
    mode = { kind: 'trickle' };
    const err = await failure(ask(2_200, 300));
    expect({ kind: err.kind, message: err.message }).toEqual({ kind: 'timeout', message: 'no answer within 300 ms' });
  });
});
