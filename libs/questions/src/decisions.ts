import type { ChatMessage } from '@neatroots/ports';

/**
 * Decisions whose prompt the caller wrote: sopops' procedure checker asks its yes/no
 * questions (decide-1, and the reasoning model's check-5) through the same model queues as
 * the question checks, so they are batched, cached, retried and bounded like the rest. The
 * caller owns the wording and reads the answer object; the question service only frames
 * several of them into one request:
 *
 *   system: the instructions (one prompt version per request)
 *   user:   ### Subject S1            each subject written once, however many decisions read it
 *           <subject>
 *           ### Questions
 *           q1 (about subject S1) <ask>
 *
 * and the reply is {"answers": [{"id": "q1", ...}, ...]}, read by parseBatchReply.
 */
export interface DecisionItem {
  /** The system message: only decisions with the same instructions share a request. */
  instructions: string;
  /** What is decided about (a session's transcript). */
  subject: string;
  ask: string;
  /**
   * Why an answer object cannot be used (the caller's reading of it), or undefined when it can.
   * An unusable answer is `ok: false` and is not cached, so asking again asks the model again;
   * a cached answer it rejects is asked again too. In-process only: a function does not cross
   * gRPC (Decide); `answer_format` names it there.
   */
  usable?: (answer: object) => string | undefined;
  /**
   * `usable` by name, for the question service over gRPC (DecideRequest.answer_format): one of
   * @neatroots/sop's ANSWER_FORMATS, which the service applies as `usable`. Ignored in-process.
   */
  answer_format?: string;
  /**
   * The most tokens its answer may take (the request's max_tokens is the sum of its questions'
   * and 200). Unset: 250, enough for a yes/no with a reason or a name; an answer that lists many
   * ids (a split, themes) or writes edits says how much it needs.
   */
  max_tokens?: number;
}

/** Which endpoint answers a decision: the decision path, or the reasoning model. */
export type DecisionEndpoint = 'decision' | 'reasoning';

/** A decision's answer object as the model wrote it, or why there is none (never a pass). */
export type DecisionReply = { ok: true; answer: unknown; model: string; cached: boolean } | { ok: false; reason: string };

export function decisionMessages(items: readonly DecisionItem[]): ChatMessage[] {
  const ids = new Map<string, string>();
  const blocks: string[] = [];
  for (const it of items) {
    if (ids.has(it.subject)) continue;
    const id = `S${ids.size + 1}`;
    ids.set(it.subject, id);
    blocks.push(`### Subject ${id}\n${it.subject}`);
  }
  const questions = items.map((it, i) => `q${i + 1} (about subject ${ids.get(it.subject)}) ${it.ask.replace(/\s*\n\s*/g, ' ')}`);
  return [
    { role: 'system', content: items[0]?.instructions ?? '' },
    { role: 'user', content: `${blocks.join('\n\n')}\n\n### Questions\n${questions.join('\n')}\n\nReply with one JSON object, {"answers": [...]}, one answer per question id.` },
  ];
}

/** The characters an item adds to a request (for the batcher's size limit). */
export function decisionChars(it: DecisionItem): number {
  return it.subject.length + it.ask.length + 100;
}
