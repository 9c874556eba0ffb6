import type { ChatMessage, ChatResponse } from '@neatroots/ports';
import type { QuestionDef, Verdict } from './judge';

/**
 * The prompts. Questions are asked in batches: several questions, possibly about several
 * runs, in one chat request, each evidence block written once however many questions read
 * it (the four questions every tool-using agent gets at run end share one). The reply is one
 * JSON object with an answer per question id.
 */

export const JUDGE_SYSTEM = `You check the work of AI agents. You are given evidence from agent runs (tool calls with their inputs and outputs, sometimes the user's request and the agent's final answer) and questions about it.
Judge only from the evidence. Every yes/no question is phrased so that "yes" means a problem.
For each question return an object with:
- "id": the question's id
- yes/no question: "p", the probability from 0 to 1 that the answer is yes
- choice question: "probs", the probability of each option label
- score question: "probs", the probability of each level number
- "quote": if there is a problem, the exact words from the evidence that show it, copied character for character (at most 200 characters); otherwise ""
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

/** One question of a batch, with its evidence already rendered. */
export interface BatchItem {
  q: QuestionDef;
  evidence: string;
}

export function describeQuestion(q: QuestionDef): string {
  switch (q.kind) {
    case 'yes_no':
      return `(yes/no) ${q.ask}`;
    case 'choice':
      return `(choice) ${q.ask}\n  Options:\n${Object.entries(q.options ?? {})
        .map(([label, desc]) => `  - ${label}: ${desc}`)
        .join('\n')}`;
    case 'score':
      return `(score) ${q.ask}\n  Levels:\n${(q.levels ?? []).map((desc, i) => `  ${i}: ${desc}`).join('\n')}`;
  }
}

/** The messages for a batch; question ids are q1..qn in item order. */
export function batchMessages(items: readonly BatchItem[]): ChatMessage[] {
  const evidenceIds = new Map<string, string>();
  const blocks: string[] = [];
  for (const it of items) {
    if (!evidenceIds.has(it.evidence)) {
      const id = `E${evidenceIds.size + 1}`;
      evidenceIds.set(it.evidence, id);
      blocks.push(`### Evidence ${id}\n${it.evidence}`);
    }
  }
  const questions = items.map((it, i) => `q${i + 1} (about evidence ${evidenceIds.get(it.evidence)}) ${describeQuestion(it.q)}`);
  return [
    { role: 'system', content: JUDGE_SYSTEM },
    { role: 'user', content: `${blocks.join('\n\n')}\n\n### Questions\n${questions.join('\n')}` },
  ];
}

/** A reply without the code fence a local model may wrap its JSON in (```json ... ```). */
export function stripCodeFence(text: string): string {
  // No regular expression: a backtracking one (/\s*```$/) took seconds on a reply with a long
  // run of spaces, and blocked the whole process meanwhile. These steps are linear.
  let t = text.trim();
  if (t.startsWith('```')) {
    t = t.slice(3);
    if (t.slice(0, 4).toLowerCase() === 'json') t = t.slice(4);
    t = t.trimStart();
  }
  if (t.endsWith('```')) t = t.slice(0, -3).trimEnd();
  return t;
}

/**
 * The first JSON object in a reply. Local models wrap JSON in code fences or add a sentence
 * before it; anything that still does not parse is malformed.
 */
export function extractJson(text: string): unknown {
  const t = stripCodeFence(text);
  try {
    return JSON.parse(t);
  } catch {
    // fall through: look for the outermost object
  }
  const start = t.indexOf('{');
  const end = t.lastIndexOf('}');
  if (start >= 0 && end > start) {
    try {
      return JSON.parse(t.slice(start, end + 1));
    } catch {
      // malformed
    }
  }
  throw new UnusableReply(`the model's reply is not JSON: ${JSON.stringify(text.slice(0, 120))}`);
}

/** A model reply that cannot be used: not JSON, refused, cut at max_tokens, empty. The model's doing, not a bug. */
export class UnusableReply extends SyntaxError {
  constructor(message: string) {
    super(message);
    this.name = 'UnusableReply';
  }
}

/** What a reply's server said of it, as much as the caller was told (a gateway over gRPC passes the text only). */
export type ReplyAccount = Pick<ChatResponse, 'text'> & Partial<Pick<ChatResponse, 'refusal' | 'finishReason' | 'usage'>>;

/**
 * Why a reply may not be usable, when its server said: refused, cut at max_tokens, or no text
 * at all (a tool call instead, say). Undefined when the server said nothing against it.
 */
export function replyProblem(res: ReplyAccount, maxTokens?: number): string | undefined {
  if (res.refusal) return `the model refused: ${res.refusal.slice(0, 200)}`;
  // The server's count when it gave one: a reasoning model's limit includes its thinking (ModelParams).
  if (res.finishReason === 'length') {
    const at = res.usage?.output_tokens || maxTokens;
    return `the answer was cut at ${at ? `${at} tokens ` : ''}(max_tokens) before it was complete`;
  }
  if (!res.text.trim()) return `the reply has no text${res.finishReason ? ` (finish_reason ${res.finishReason})` : ''}`;
  return undefined;
}

/**
 * The JSON of a reply to a single ask (a plan, a draft), or UnusableReply saying why there is
 * none: the server's account first (a refusal, a reply cut at max_tokens, no text), else that
 * the text is not JSON.
 */
export function readJsonReply(res: ReplyAccount, maxTokens?: number): unknown {
  try {
    return extractJson(res.text);
  } catch (e) {
    throw new UnusableReply(replyProblem(res, maxTokens) ?? (e as Error).message);
  }
}

/** The answers of a batch reply, by question index (0-based); missing ones are absent. */
export function parseBatchReply(text: string, n: number): Map<number, unknown> {
  const json = extractJson(text);
  const out = new Map<number, unknown>();
  let list: unknown[] | undefined;
  if (Array.isArray(json)) list = json;
  else if (json && typeof json === 'object') {
    const o = json as Record<string, unknown>;
    if (Array.isArray(o.answers)) list = o.answers;
    else if (n === 1 && ('p' in o || 'probs' in o || 'label' in o || 'level' in o || 'answer' in o || 'holds' in o)) list = [{ id: 'q1', ...o }];
    else {
      // {"q1": {...}, "q2": {...}}
      list = Object.entries(o)
        .filter(([k, v]) => /^q\d+$/i.test(k) && v && typeof v === 'object')
        .map(([k, v]) => ({ id: k, ...(v as object) }));
    }
  }
  if (!list) throw new SyntaxError('the reply holds no "answers" list');
  list.forEach((a, i) => {
    if (!a || typeof a !== 'object') return;
    const id = (a as Record<string, unknown>).id;
    const m = typeof id === 'string' ? /^q?(\d+)$/i.exec(id.trim()) : typeof id === 'number' ? [String(id), String(id)] : null;
    // Without ids, answers are read in order; an id that names no question is nobody's answer.
    const idx = m ? Number(m[1]) - 1 : id === undefined && n === list!.length ? i : -1;
    if (idx >= 0 && idx < n && !out.has(idx)) out.set(idx, a);
  });
  return out;
}

// ---- the second look ----------------------------------------------------------------------

export const SECOND_LOOK_SYSTEM = `You take a second look at problems that a check found in AI agents' runs, before they are reported. Be strict: confirm a problem only if the evidence really shows it, and only if it still holds given what the run did earlier (an earlier step may have already done what seems missing, or explain it).
For each case return an object with:
- "id": the case's id
- "holds": true or false
- "quote": the exact words from the run that show the problem, copied character for character (at most 200 characters)
- "reason": one short sentence
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

/** One case of a second-look batch: the verdict to confirm, with what the run did before. */
export interface LookItem {
  q: QuestionDef;
  verdict: Verdict;
  evidence: string;
  context: string;
  quote?: string;
}

export function verdictText(q: QuestionDef, v: Verdict): string {
  switch (q.kind) {
    case 'yes_no':
      return `The check answered yes to: ${q.ask}`;
    case 'choice':
      return `The check answered "${v.label}" (${q.options?.[v.label ?? ''] ?? ''}) to: ${q.ask}; that answer means a problem.`;
    case 'score': {
      const lvl = Math.round(v.value ?? 0);
      return `The check scored ${v.value} (about level ${lvl}: ${q.levels?.[lvl] ?? ''}) on: ${q.ask}; that is at or above the problem line ${q.flag_at_level}.`;
    }
  }
}

/** The messages for a batch of second looks; case ids are q1..qn in item order. */
export function secondLookMessages(items: readonly LookItem[]): ChatMessage[] {
  const cases = items.map(
    (it, i) =>
      `### Case q${i + 1}\n#### What the run did earlier\n${it.context}\n\n#### The part that was judged\n${it.evidence}\n\n#### The problem found\n${verdictText(it.q, it.verdict)}\n` +
      (it.quote ? `Quote offered: ${JSON.stringify(it.quote)}\n` : ''),
  );
  return [
    { role: 'system', content: SECOND_LOOK_SYSTEM },
    { role: 'user', content: `${cases.join('\n')}\nFor each case: does the problem hold? Quote the words of the run that show it.` },
  ];
}

export interface SecondLookReply {
  holds: boolean;
  quote?: string;
  reason?: string;
}

/** One case's reply, as parsed from the batch reply's answers. */
export function readSecondLook(o: unknown): SecondLookReply {
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new SyntaxError('the second look reply is not a JSON object');
  const r = o as Record<string, unknown>;
  let holds: boolean | undefined;
  if (typeof r.holds === 'boolean') holds = r.holds;
  else if (typeof r.holds === 'string' && /^(true|yes|false|no)$/i.test(r.holds)) holds = /^(true|yes)$/i.test(r.holds);
  if (holds === undefined) throw new SyntaxError('the second look reply has no "holds"');
  const out: SecondLookReply = { holds };
  if (typeof r.quote === 'string' && r.quote.trim()) out.quote = r.quote.trim();
  if (typeof r.reason === 'string') out.reason = r.reason;
  return out;
}

// ---- note-writing ---------------------------------------------------------------------------

export const NOTE_SYSTEM = `You write a short note to an AI agent that is still working, about a problem a check found in what it did. Write to the agent in the second person, at most three sentences: what went wrong, and what to do now. No greeting, no preamble.`;

export function noteMessages(q: QuestionDef, quote: string | undefined, guidance: string | undefined): ChatMessage[] {
  return [
    { role: 'system', content: NOTE_SYSTEM },
    {
      role: 'user',
      content:
        `The problem: ${q.title ?? q.ask}\nThe question that found it: ${q.ask}\n` +
        (quote ? `The words of the run that show it: ${JSON.stringify(quote)}\n` : '') +
        (guidance ? `What the check's author advises: ${guidance}\n` : ''),
    },
  ];
}
