/**
 * The port through which the checker's models are asked: the question service (the one
 * gateway to models), in-process in the embedded deployment (its QuestionAnswerer) and over
 * gRPC (neatroots.v1.Question Decide) distributed. The checker writes its own prompts; the
 * gateway batches decisions asked at once into shared model requests, caches, retries and
 * bounds them, and hands back each answer object as the model wrote it.
 */
export interface DecisionItem {
  /** The prompt version's instructions (the system message). */
  instructions: string;
  /** What is decided about: the session's transcript, shared by every question about it. */
  subject: string;
  ask: string;
  /** The most tokens the answer may take; unset, 250 (a yes/no with a reason, a name). */
  max_tokens?: number;
  /**
   * Why an answer object cannot be used, or undefined when it can: the gateway answers an
   * unusable one `ok: false` and does not cache it, so checking again asks the model again.
   */
  usable?: (answer: object) => string | undefined;
  /**
   * `usable` by name, for a gateway in another process (over gRPC a function cannot travel):
   * one of ANSWER_FORMATS (./parse.ts), which the question service applies as `usable`.
   */
  answer_format?: string;
}

/** decision: the decision model when it is on, else the local LLM. reasoning: the reasoning model, else the local LLM. */
export type DecisionEndpoint = 'decision' | 'reasoning';

export type DecisionReply = { ok: true; answer: unknown; model: string; cached: boolean } | { ok: false; reason: string };

export interface DecisionGateway {
  /**
   * `signal` aborted (the check stops): the call is given up (over gRPC, cancelled) and rejects
   * with the signal's reason, never answers `ok: false`. What the model answers meanwhile may
   * still be cached by the question service, for the check that runs next.
   */
  decide(endpoint: DecisionEndpoint, item: DecisionItem, opts?: { signal?: AbortSignal }): Promise<DecisionReply>;
  /** The model names that answer each endpoint; null when none is configured. */
  decisionModels(): Promise<{ decision: string | null; reasoning: string | null }>;
}
