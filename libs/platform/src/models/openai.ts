import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { ModelError, type ChatModel, type ChatRequest, type ChatResponse } from '@neatroots/ports';

/**
 * The model adapter: any OpenAI-compatible chat-completions endpoint through the `openai`
 * package (the hosted API, vLLM, Ollama's /v1, llama.cpp's server). One call is one HTTP
 * request: the client's own retries are off, because the question service's queue decides
 * what to retry and counts it.
 */
export interface OpenAiModelOptions {
  /** decision (the hosted decision model) or local (the local LLM). */
  role: string;
  /** e.g. https://api.openai.com/v1, http://127.0.0.1:8000/v1 (vLLM), http://127.0.0.1:11434/v1 (Ollama). */
  baseURL: string;
  /** Local servers usually take any key; the client insists on one. */
  apiKey?: string;
  model: string;
  timeoutMs?: number;
  /** Ask for response_format json_object when a call wants JSON (default on; some servers reject it). */
  jsonMode?: boolean;
  temperature?: number;
  /**
   * How the request is written. `classic` (default): `max_tokens` and `temperature` (0). `reasoning`,
   * for hosted reasoning models that reject both: `max_completion_tokens`, no temperature, and the
   * answer's budget plus REASONING_ALLOWANCE_TOKENS, since their thinking counts in that limit.
   */
  params?: ModelParams;
  /**
   * The most bytes of a reply's body read (an error's body too); a longer one is cut off and the
   * call fails. Default replyLimitBytes(the request's token limit): a reply holds at most that
   * many tokens, so anything far larger is a server gone wrong, not an answer.
   */
  maxReplyBytes?: number;
  /**
   * The bound of a reply to a request that asks for few tokens (replyLimitBytes' least; default
   * MIN_REPLY_LIMIT_BYTES, 1 MiB): NEATROOTS_MODEL_REPLY_MAX_BYTES.
   */
  minReplyLimitBytes?: number;
}

export type ModelParams = 'classic' | 'reasoning';

/** Tokens a reasoning model may think before it answers, added to the answer's budget (params: reasoning). */
export const REASONING_ALLOWANCE_TOKENS = 8_000;

export const DEFAULT_MODEL_TIMEOUT_MS = 30_000;

/** The least a reply may hold, whatever the request's token limit: 1 MiB. */
export const MIN_REPLY_LIMIT_BYTES = 1024 * 1024;

/** Bytes a reply may hold per token asked for: a token is a few bytes, wrapped in JSON and escaped. */
export const REPLY_BYTES_PER_TOKEN = 64;

/**
 * The most bytes of a model's reply read for a request that asks for at most `tokens` tokens:
 * max(`least` (1 MiB unless NEATROOTS_MODEL_REPLY_MAX_BYTES says), 64 x tokens). The questions ask for a few thousand tokens (a reply of some 10 KB);
 * a server that answers megabytes would otherwise be read whole into memory, and with every
 * question asked at once that memory is what ingest needs to take spans.
 */
export function replyLimitBytes(tokens: number | undefined, least = MIN_REPLY_LIMIT_BYTES): number {
  return Math.max(least, REPLY_BYTES_PER_TOKEN * (tokens ?? 0));
}

function tooLarge(limit: number): ModelError {
  return new ModelError('server', `the model's reply is larger than ${limit} bytes`);
}

/**
 * A fetch that reads the response's body whole, up to `limit` bytes, and hands the client a
 * response holding those bytes. Past the limit (or a content-length above it) the body is
 * cancelled, which closes that connection, and the call fails with a server error naming the
 * limit. A body read whole leaves the connection free for the next request (keep-alive).
 */
export function boundedFetch(limit: number, inner: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    if (!res.body) return res;
    const declared = Number(res.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > limit) {
      await res.body.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    const reader = res.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      let read: Awaited<ReturnType<typeof reader.read>>;
      try {
        read = await reader.read();
      } catch (e) {
        // Read here, the body's failure would reach the client as a failed request ("Connection error.").
        if (closedMidAnswer(e)) throw closedEarly(e);
        throw e;
      }
      const { done, value } = read;
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        chunks.length = 0;
        await reader.cancel().catch(() => undefined);
        throw tooLarge(limit);
      }
      chunks.push(value);
    }
    const body = Buffer.concat(chunks, size);
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * How long a 429 or 503 asks the caller to wait: `retry-after-ms` (milliseconds, sent by some
 * hosted APIs), else `retry-after` (seconds, or an HTTP date). Undefined when neither is there
 * or readable.
 */
export function retryAfterMs(headers: { get(name: string): string | null } | undefined, now = Date.now()): number | undefined {
  const ms = headers?.get('retry-after-ms');
  if (ms != null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Math.ceil(Number(ms));
  const after = headers?.get('retry-after')?.trim();
  if (!after) return undefined;
  if (/^\d+(\.\d+)?$/.test(after)) return Math.ceil(Number(after) * 1000);
  const at = Date.parse(after);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The codes of a connection the other side closed (undici's, and the system's). */
const CLOSED_CODES = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE']);

/**
 * Whether the server closed the connection while its answer was being read: fetch rejects the
 * body with TypeError "terminated", whose cause is the socket's error (UND_ERR_SOCKET, "other
 * side closed"). Not an APIConnectionError: the answer had begun.
 */
function closedMidAnswer(e: unknown): boolean {
  // By name: fetch's TypeError may come from another realm than this module's TypeError.
  const err = e as { name?: unknown; message?: unknown; cause?: unknown } | null;
  if (!err || typeof err !== 'object' || err.name !== 'TypeError') return false;
  if (err.message === 'terminated') return true;
  for (let c: unknown = err.cause, i = 0; c && typeof c === 'object' && i < 4; c = (c as { cause?: unknown }).cause, i++) {
    if (CLOSED_CODES.has(String((c as { code?: unknown }).code))) return true;
  }
  return false;
}

function closedEarly(e: unknown): ModelError {
  return new ModelError('connection', 'the model server closed the connection before its answer was complete', undefined, { cause: e });
}

export function toModelError(e: unknown): ModelError {
  if (e instanceof ModelError) return e;
  // What boundedFetch threw (a reply past its limit, a connection closed mid-answer), which the client wraps as a connection error.
  if (e instanceof APIConnectionError && !(e instanceof APIConnectionTimeoutError) && e.cause instanceof ModelError) return e.cause;
  // Order matters: the timeout and abort errors are kinds of connection error.
  if (e instanceof APIConnectionTimeoutError) return new ModelError('timeout', 'the request timed out', undefined, { cause: e });
  if (e instanceof APIUserAbortError) return new ModelError('aborted', 'the request was aborted', undefined, { cause: e });
  if (e instanceof APIConnectionError) return new ModelError('connection', e.message, undefined, { cause: e });
  if (closedMidAnswer(e)) return closedEarly(e);
  if (e instanceof APIError) {
    const status = e.status;
    // The client's message starts with the status already ("500 upstream 500").
    const said = status !== undefined && e.message.startsWith(`${status} `) ? e.message.slice(`${status} `.length) : e.message;
    const msg = `HTTP ${status ?? '?'}: ${said}`;
    const wait = retryAfterMs(e.headers as { get(name: string): string | null } | undefined);
    const opts = { cause: e, ...(wait !== undefined ? { retryAfterMs: wait } : {}) };
    if (status === 429) return new ModelError('rate_limited', msg, status, opts);
    if (status === 408 || (status !== undefined && status >= 500)) return new ModelError('server', msg, status, opts);
    return new ModelError('rejected', msg, status, { cause: e });
  }
  return new ModelError('server', (e as Error)?.message ?? String(e), undefined, { cause: e });
}

/** What stands for the model's key wherever a server's answer echoed it. */
export const KEY_PLACEHOLDER = '[model key]';

/** Keys shorter than this are not looked for: "none", "x" would be hidden in every word. */
const MIN_HIDDEN_KEY_CHARS = 8;

/** The text of an error and of its causes that could hold what a server sent back. */
function errorTexts(e: unknown, depth = 4): string[] {
  const out: string[] = [];
  for (let i = 0; e && typeof e === 'object' && i < depth; i++, e = (e as { cause?: unknown }).cause) {
    const o = e as { message?: unknown; stack?: unknown; error?: unknown };
    out.push(String(o.message ?? ''), String(o.stack ?? ''));
    try {
      if (o.error !== undefined) out.push(JSON.stringify(o.error) ?? '');
    } catch {
      // a body that cannot be written out is not kept either
    }
  }
  if (typeof e === 'string') out.push(e);
  return out;
}

/** A cause with every `key` in its message and stack replaced; the server's body is not kept. */
function causeWithoutKey(c: unknown, hide: (s: string) => string, depth = 4): unknown {
  if (typeof c === 'string') return hide(c);
  if (!(c instanceof Error) || depth <= 0) return undefined;
  const copy = new Error(hide(c.message), c.cause !== undefined ? { cause: causeWithoutKey(c.cause, hide, depth - 1) } : undefined);
  copy.name = c.name;
  copy.stack = hide(c.stack ?? '');
  for (const k of ['status', 'code'] as const) {
    const v = (c as unknown as Record<string, unknown>)[k];
    if (typeof v === 'string' || typeof v === 'number') (copy as unknown as Record<string, unknown>)[k] = v;
  }
  return copy;
}

/**
 * The error with the endpoint's key replaced by `[model key]` wherever it appears: some servers
 * echo the key they refused ("Incorrect API key provided: sk-..."), and what a ModelError says
 * is kept in not-checked reasons, served by the API and logged.
 */
export function withoutKey(err: ModelError, key: string | undefined): ModelError {
  if (!key || key.length < MIN_HIDDEN_KEY_CHARS || !errorTexts(err).some((t) => t.includes(key))) return err;
  const hide = (s: string) => s.split(key).join(KEY_PLACEHOLDER);
  return new ModelError(err.kind, hide(err.message), err.status, {
    cause: causeWithoutKey(err.cause, hide),
    ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
  });
}

export function openAiChatModel(o: OpenAiModelOptions): ChatModel {
  const timeout = o.timeoutMs ?? DEFAULT_MODEL_TIMEOUT_MS;
  const client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey || 'none', timeout, maxRetries: 0 });
  const jsonMode = o.jsonMode ?? true;
  const reasoning = o.params === 'reasoning';
  return {
    role: o.role,
    id: `${o.role}:${o.baseURL}:${o.model}`,
    name: o.model,
    async complete(req: ChatRequest): Promise<ChatResponse> {
      // Our own deadline rather than the client's: whether an abort was a timeout is then known
      // for certain, whatever realm the fetch implementation's AbortError comes from.
      const ms = req.timeoutMs ?? timeout;
      const ctrl = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        ctrl.abort();
      }, ms);
      const onAbort = () => ctrl.abort();
      req.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const tokens = req.maxTokens !== undefined && reasoning ? req.maxTokens + REASONING_ALLOWANCE_TOKENS : req.maxTokens;
        const limit = o.maxReplyBytes ?? replyLimitBytes(tokens, o.minReplyLimitBytes);
        // A client per request for the request's limit; connections are pooled by fetch's global dispatcher, not by the client.
        const res = await client.withOptions({ fetch: boundedFetch(limit) }).chat.completions.create(
          {
            model: o.model,
            messages: req.messages,
            ...(reasoning
              ? tokens !== undefined
                ? { max_completion_tokens: tokens }
                : {}
              : { temperature: o.temperature ?? 0, ...(tokens !== undefined ? { max_tokens: tokens } : {}) }),
            ...(req.json && jsonMode ? { response_format: { type: 'json_object' as const } } : {}),
          },
          { timeout: ms + 1_000, signal: ctrl.signal, maxRetries: 0 },
        );
        return readReply(res as unknown);
      } catch (e) {
        if (timedOut) throw new ModelError('timeout', `no answer within ${ms} ms`, undefined, { cause: e });
        if (req.signal?.aborted) throw new ModelError('aborted', 'the request was aborted', undefined, { cause: e });
        throw withoutKey(toModelError(e), o.apiKey);
      } finally {
        clearTimeout(timer);
        req.signal?.removeEventListener('abort', onAbort);
      }
    },
  };
}

/**
 * The chat response read defensively: some servers and proxies answer HTTP 200 with an error
 * object and no choices, which is reported as a server error saying what came back (retried
 * like a 5xx), not as a TypeError. The finish reason and a refusal are kept for the caller's
 * account of a reply it cannot use (cut at max_tokens, refused).
 */
export function readReply(res: unknown): ChatResponse {
  const r = (res && typeof res === 'object' ? res : {}) as {
    choices?: unknown;
    model?: unknown;
    usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
    error?: unknown;
  };
  // A stream (server-sent events: "data: {...}") is read as text: it was not asked for (some
  // proxies and servers stream whatever the request says), and asking again gets another.
  if (typeof res === 'string' && /^(?:data|event):/.test(res.trimStart())) {
    throw new ModelError('rejected', 'the model server answered with a stream, which was not asked for');
  }
  if (!Array.isArray(r.choices) || r.choices.length === 0) {
    const err = r.error && typeof r.error === 'object' ? (r.error as { message?: unknown }).message : r.error;
    const what =
      err !== undefined && err !== null
        ? `an error: ${typeof err === 'string' ? err : JSON.stringify(err)}`
        : Array.isArray(r.choices)
          ? 'an empty "choices" list'
          : `no "choices": ${typeof res === 'string' ? res : JSON.stringify(res)}`;
    throw new ModelError('server', `the server answered HTTP 200 with ${what}`.slice(0, 300));
  }
  const choice = (r.choices[0] ?? {}) as { message?: { content?: unknown; refusal?: unknown } | null; finish_reason?: unknown };
  const content = choice.message?.content;
  const out: ChatResponse = { text: typeof content === 'string' ? content : '' };
  if (typeof r.model === 'string') out.model = r.model;
  if (typeof choice.finish_reason === 'string') out.finishReason = choice.finish_reason;
  if (typeof choice.message?.refusal === 'string' && choice.message.refusal) out.refusal = choice.message.refusal;
  if (r.usage) out.usage = { input_tokens: r.usage.prompt_tokens, output_tokens: r.usage.completion_tokens };
  return out;
}
