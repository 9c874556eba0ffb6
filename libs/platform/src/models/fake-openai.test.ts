/**
 * A local HTTP server speaking the OpenAI chat-completions API, answering from a script, for
 * the tests of the model adapter and the question service: the real `openai` client talks to
 * it over real HTTP. Named *.test.ts: a helper, neither run by jest (it runs *.spec.ts) nor built.
 *
 * Like a real server it stops at the request's max_tokens (or max_completion_tokens): a reply
 * longer than that is cut there and answered with finish_reason "length". Tokens are counted
 * by fakeTokens, which counts at least as many as real tokenizers do for JSON, words and
 * random ids, so an answer that fits here fits a real model's budget.
 */
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ModelError } from '@neatroots/ports';

export interface FakeCall {
  n: number;
  path: string;
  body: {
    model: string;
    messages: { role: string; content: string }[];
    response_format?: { type: string };
    max_tokens?: number;
    max_completion_tokens?: number;
    [k: string]: unknown;
  };
  at: number;
  kind: PromptKind;
  /** The request's Authorization header (`Bearer <key>`). */
  authorization?: string;
}

export interface FakeReply {
  status?: number;
  /** The assistant message's content. */
  content?: string;
  /** Content given as JSON (serialised). */
  json?: unknown;
  /** Raw response body (overrides the rest): malformed HTTP answers. */
  body?: string;
  delayMs?: number;
  /** Never answer: the client's timeout fires. */
  hang?: boolean;
  /** Response headers (e.g. retry-after on a 429). */
  headers?: Record<string, string>;
  /** The message's refusal (its content is null then, as a real refusal's is). */
  refusal?: string;
  /** The choice's finish_reason when the reply is not cut (default "stop"). */
  finish_reason?: string;
}

/**
 * Tokens as the fake counts them, on the generous side of real tokenizers: a word is a token
 * per 4 lowercase letters (a capital may lead), capitals go in pairs, digits in threes, every
 * other character is a token of its own, and spaces join the token after them. A random id
 * such as sf_Kx9aBcQ2zT... comes out near 1.5 characters a token (real tokenizers: 2 to 3);
 * English near 3.5 (real: about 4).
 */
const TOKEN = /\s*(?:[A-Z]?[a-z]{1,4}|[A-Z]{1,2}|\d{1,3}|[^\sA-Za-z\d])|\s+/gy;

export function fakeTokens(text: string): string[] {
  return text.match(TOKEN) ?? [];
}

/** The reply as a server with this budget sends it: whole, or its first `max` tokens and cut. */
export function fakeCut(text: string, max: number | undefined): { text: string; tokens: number; cut: boolean } {
  const tokens = fakeTokens(text);
  if (max === undefined || tokens.length <= max) return { text, tokens: tokens.length, cut: false };
  return { text: tokens.slice(0, max).join(''), tokens: max, cut: true };
}

export type FakeScript = (call: FakeCall) => FakeReply | Promise<FakeReply>;

export interface FakeOpenAI {
  url: string;
  calls: FakeCall[];
  script: FakeScript;
  /** Requests being answered right now, and the most at once. */
  open: number;
  maxOpen: number;
  close(): Promise<void>;
}

export type PromptKind = 'judge' | 'second_look' | 'note' | 'plan' | 'draft' | 'other';

export function promptKind(messages: { role: string; content: string }[]): PromptKind {
  const sys = messages.find((m) => m.role === 'system')?.content ?? '';
  if (sys.startsWith('You check the work of AI agents')) return 'judge';
  if (sys.startsWith('You take a second look')) return 'second_look';
  if (sys.startsWith('You write a short note')) return 'note';
  if (sys.startsWith('You plan the checks')) return 'plan';
  if (sys.startsWith('You turn a concern')) return 'draft';
  return 'other';
}

export async function startFakeOpenAI(script: FakeScript): Promise<FakeOpenAI> {
  const sockets = new Set<Socket>();
  const fake: FakeOpenAI = {
    url: '',
    calls: [],
    script,
    open: 0,
    maxOpen: 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', async () => {
      fake.open++;
      fake.maxOpen = Math.max(fake.maxOpen, fake.open);
      const done = () => fake.open--;
      try {
        const body = JSON.parse(data) as FakeCall['body'];
        const call: FakeCall = { n: fake.calls.length + 1, path: req.url ?? '', body, at: Date.now(), kind: promptKind(body.messages ?? []), authorization: req.headers.authorization };
        fake.calls.push(call);
        const reply = await fake.script(call);
        if (reply.hang) {
          res.on('close', done);
          return;
        }
        if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
        const status = reply.status ?? 200;
        let out: string;
        if (reply.body !== undefined) out = reply.body;
        else if (status >= 400) out = JSON.stringify({ error: { message: reply.content ?? `scripted ${status}`, type: 'scripted' } });
        else {
          const whole = reply.refusal !== undefined ? '' : reply.json !== undefined ? JSON.stringify(reply.json) : (reply.content ?? '');
          const sent = fakeCut(whole, body.max_completion_tokens ?? body.max_tokens);
          const message = reply.refusal !== undefined ? { role: 'assistant', content: null, refusal: reply.refusal } : { role: 'assistant', content: sent.text };
          out = JSON.stringify({
            id: `chatcmpl-${call.n}`,
            object: 'chat.completion',
            created: Math.floor(Date.now() / 1000),
            model: body.model,
            choices: [{ index: 0, message, finish_reason: sent.cut ? 'length' : (reply.finish_reason ?? 'stop') }],
            usage: { prompt_tokens: 10, completion_tokens: sent.tokens, total_tokens: 10 + sent.tokens },
          });
        }
        res.writeHead(status, { 'content-type': 'application/json', ...reply.headers });
        res.end(out);
        done();
      } catch (e) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `fake server: ${(e as Error).message}` } }));
        done();
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

/** One question of a batch prompt, as the fake reads it back. */
export interface PromptQuestion {
  id: string;
  kind: 'yes/no' | 'choice' | 'score';
  ask: string;
  evidence: string;
}

/** The questions of a judge prompt (see batchMessages in @neatroots/questions). */
export function parseJudgePrompt(call: FakeCall): PromptQuestion[] {
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const evidence = new Map<string, string>();
  const [blocks, questions = ''] = user.split('\n### Questions\n');
  for (const part of blocks.split(/^### Evidence /m).slice(1)) {
    const nl = part.indexOf('\n');
    evidence.set(part.slice(0, nl).trim(), part.slice(nl + 1).trim());
  }
  const out: PromptQuestion[] = [];
  for (const m of questions.matchAll(/^(q\d+) \(about evidence (E\d+)\) \((yes\/no|choice|score)\) (.*)$/gm)) {
    out.push({ id: m[1], kind: m[3] as PromptQuestion['kind'], ask: m[4], evidence: evidence.get(m[2]) ?? '' });
  }
  return out;
}

/** A judge that answers every question of a batch with `answer(q)` (the fields besides id). */
export function judgeReply(call: FakeCall, answer: (q: PromptQuestion) => Record<string, unknown>): FakeReply {
  return { json: { answers: parseJudgePrompt(call).map((q) => ({ id: q.id, ...answer(q) })) } };
}

/**
 * A slow model held still: the questions asked of runs are answered only once `release()` is
 * called (plans, notes and the rest at once, a second look upholds). A question is flagged, with
 * its quote, where `quoteOf` finds one in its evidence; the others do not hold.
 */
export async function startHeldModel(quoteOf: (q: PromptQuestion) => string | undefined = () => undefined): Promise<{ fake: FakeOpenAI; release(): void }> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const fake = await startFakeOpenAI(async (call) => {
    if (call.kind === 'second_look') return { json: { holds: true } };
    if (call.kind !== 'judge') return { json: {} };
    await held;
    return judgeReply(call, (q) => {
      const quote = quoteOf(q);
      return quote ? { p: 0.98, quote } : { p: 0.02 };
    });
  });
  return { fake, release };
}

/** The ModelError a model call fails with (the test fails when it succeeds or fails otherwise). */
export async function failure(p: Promise<unknown>): Promise<ModelError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ModelError);
    return e as ModelError;
  }
  throw new Error('expected the call to fail');
}
