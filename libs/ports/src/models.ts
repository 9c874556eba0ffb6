/**
 * The model port: an OpenAI-compatible chat-completions endpoint (a hosted API, vLLM, Ollama,
 * llama.cpp's server) through the `openai` package in production, a scripted fake in tests.
 * The question service is its only caller; batching, caching, retries and routing are its
 * business, so an adapter makes exactly one HTTP request per call and never retries.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatRequest {
  messages: ChatMessage[];
  /** Ask for a JSON object (response_format json_object where the server supports it). */
  json?: boolean;
  maxTokens?: number;
  /** Overrides the adapter's timeout for this call. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ChatResponse {
  text: string;
  /** The model name the server reported. */
  model?: string;
  usage?: { input_tokens?: number; output_tokens?: number };
  /** Why the model stopped, as the server said: `stop`, `length` (cut at maxTokens), `tool_calls`... */
  finishReason?: string;
  /** The model's refusal, when it declined to answer (no content then). */
  refusal?: string;
}

/** Why a call failed, which decides whether a retry can help. */
export type ModelErrorKind = 'timeout' | 'rate_limited' | 'server' | 'connection' | 'rejected' | 'aborted';

export class ModelError extends Error {
  /**
   * How long the server asked the caller to wait before trying again (a 429's or 503's
   * `retry-after-ms` or `retry-after` header), in milliseconds; absent when it said nothing.
   */
  readonly retryAfterMs?: number;

  constructor(
    readonly kind: ModelErrorKind,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown; retryAfterMs?: number },
  ) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'ModelError';
    if (options?.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs;
  }

  /** Rate limits, 5xx and dropped connections are worth retrying; a timeout or a 4xx is not. */
  get retryable(): boolean {
    return this.kind === 'rate_limited' || this.kind === 'server' || this.kind === 'connection';
  }
}

export interface ChatModel {
  /** decision (the hosted decision model), local (the local LLM), or a name of the caller's. */
  readonly role: string;
  /** Identifies the endpoint and model: part of the cache key, and the per-endpoint queue. */
  readonly id: string;
  /** The model's name at its endpoint (what results record as the model that answered). */
  readonly name?: string;
  complete(req: ChatRequest): Promise<ChatResponse>;
  close?(): Promise<void>;
}
