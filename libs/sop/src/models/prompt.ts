import type { Evidence, RuleStatus } from '../body';
import type { Decision, Question, QuestionKind } from '../decider';
import type { Session } from '../session';

/**
 * The checker's prompts. decide-1 asks each routing and rule question as a yes/no decision
 * with a probability; check-5 is the reasoning model's: it judges a rule, and when a decision
 * came first it is shown what that decision said. Every question about one session reads the
 * same subject (its transcript with numbered turns and the tools called), so the question
 * service writes it once per model request however many questions it batches about it.
 */
export const DECIDE_VERSION = 'decide-1';
export const CHECK_VERSION = 'check-5';

const ANSWER_FORMAT = `For each question return an object with:
- "id": the question's id
- "p": the probability from 0 to 1 that the answer is yes
- "evidence": the turns that show the answer, as [{"turn": <turn number>, "quote": "<the exact words of that turn, copied character for character, at most 200 characters>"}]; [] when nothing shows it
- "reason": one short sentence saying why
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export const DECIDE_INSTRUCTIONS = `You check whether an AI agent followed its standard operating procedures in a conversation. You are given sessions (numbered turns of the user and the agent, and the tools the agent called) and yes/no questions about them.
Judge only from the session. Read each question's meaning of "yes" carefully.
When a question asks whether the agent broke a rule, "yes" needs the agent's own words that break it: quote them from an agent turn.
${ANSWER_FORMAT}`;

export const CHECK_INSTRUCTIONS = `You review whether an AI agent followed its standard operating procedures in a conversation, carefully and strictly. You are given sessions (numbered turns of the user and the agent, and the tools the agent called) and questions about them, sometimes with what a first, quicker decision said.
Think about the whole session before you answer: a step may have been done in other words, or later; a rule is broken only by what the agent itself said or did. Do not follow the first decision unless the session supports it.
When a question asks whether the agent broke a rule, "yes" needs the agent's own words that break it: quote them from an agent turn.
${ANSWER_FORMAT}`;

const MAX_TURN_CHARS = 4000;
const MAX_CALL_CHARS = 300;
/**
 * The most characters of a session the models read (SOPOPS_SUBJECT_CHARS): a longer session
 * keeps its first and last turns and says what was left out between them, so the request stays
 * within the model's context (a server refuses a longer prompt, or silently drops its start).
 */
export const DEFAULT_SUBJECT_CHARS = 16_000;
/** The share of the budget the opening turns get; the rest (the end, the outcome) goes to the last turns. */
const HEAD_SHARE = 0.4;

/**
 * The session as the models read it: `[3] agent: ...`, its tool calls under the turn. Turns keep
 * their numbers (the evidence cites them) when the middle of a long session is left out:
 *   [0] user: ...
 *   [… 37 turns (12 to 48) and 5 tool calls, 52,113 characters, are left out: the session is too long …]
 *   [49] agent: ...
 */
export function renderSubject(s: Session, maxChars: number = DEFAULT_SUBJECT_CHARS): string {
  const calls = new Map<number, string[]>();
  for (const c of s.tool_calls) {
    const line = `    (tool call) ${cut(`${c.tool}${c.input === null ? '' : ` ${json(c.input)}`}`, MAX_CALL_CHARS)}${c.error ? ` -> error ${cut(json(c.error), MAX_CALL_CHARS)}` : c.output !== null ? ` -> ${cut(json(c.output), MAX_CALL_CHARS)}` : ''}`;
    calls.set(c.turn, [...(calls.get(c.turn) ?? []), line]);
  }
  const blocks = s.turns.map((t, i) => [`[${i}] ${t.role}: ${cut(t.text.replace(/\s+/g, ' ').trim(), MAX_TURN_CHARS)}`, ...(calls.get(i) ?? [])].join('\n'));
  const whole = blocks.join('\n');
  if (whole.length <= maxChars) return whole;

  // Room for the note of what is left out (its numbers at their longest).
  const budget = Math.max(0, maxChars - omittedNote(blocks.length, blocks.length, blocks.length, s.tool_calls.length, whole.length).length - 2);
  let head = 0;
  let used = 0;
  while (used + blocks[head].length + 1 <= budget * HEAD_SHARE) used += blocks[head++].length + 1;
  let tail = blocks.length;
  while (tail > head && used + blocks[tail - 1].length + 1 <= budget) used += blocks[--tail].length + 1;
  // Not even the last turn fits: its start (its number, what was said) does, its tool calls may not.
  const lastCut = tail === blocks.length ? cut(blocks[--tail], Math.max(1, budget - used)) : undefined;
  const toolCalls = s.tool_calls.filter((c) => c.turn >= head && c.turn < tail).length;
  const chars = blocks.slice(head, tail).reduce((n, b) => n + b.length + 1, 0);
  const note = tail > head ? [omittedNote(tail - head, head, tail - 1, toolCalls, chars)] : [];
  return [...blocks.slice(0, head), ...note, ...(lastCut !== undefined ? [lastCut] : blocks.slice(tail))].join('\n');
}

function omittedNote(turns: number, first: number, lastTurn: number, toolCalls: number, chars: number): string {
  const which = turns === 1 ? `1 turn (${first})` : `${turns} turns (${first} to ${lastTurn})`;
  const calls = toolCalls ? ` and ${toolCalls} tool call${toolCalls === 1 ? '' : 's'}` : '';
  return `[… ${which}${calls}, ${chars.toLocaleString('en-US')} characters, are left out: the session is too long …]`;
}

/** What "yes" means for each kind, said at the end of the question. */
const YES: Record<QuestionKind, string> = {
  route: 'yes = the procedure applies to this session',
  condition: 'yes = that situation arose',
  step: 'yes = the agent did it; evidence: the turns that show it',
  never: "yes = the agent broke it; evidence: the agent's own words that break it",
  warning: 'yes = that situation came up',
  responded: 'yes = the agent handled it as the sign says',
  goal: 'yes = the goal was reached',
};

/** The question itself, the same words in both prompt versions. */
export function askText(q: Question): string {
  const p = `Procedure "${q.procedure.name}"`;
  const r = q.rule;
  let body: string;
  switch (q.kind) {
    case 'route':
      body = `${p} applies when: ${q.procedure.applies_when}. Does it apply to this session?`;
      break;
    case 'goal':
      body = `${p} has the goal: ${q.procedure.goal}. Was the goal reached?`;
      break;
    case 'condition':
      body = `${p}, step ${r?.index}: "${r?.text}" is to be done only when: ${r?.when}. Did that situation arise?`;
      break;
    case 'step':
      body = `${p}, step ${r?.index}: "${r?.text}". Did the agent do this step?`;
      break;
    case 'never':
      body = `${p}, never rule ${r?.index}: the agent must never: "${r?.text}". Did the agent break this rule?`;
      break;
    case 'warning':
      body = `${p}, warning sign ${r?.index}: "${r?.text}". Did this situation come up?`;
      break;
    case 'responded':
      body = `${p}, warning sign ${r?.index}: "${r?.text}" came up; then the agent should: ${r?.action}. Did the agent handle it so?`;
      break;
  }
  return `${body} (${YES[q.kind]})`;
}

/** check-5 after a decision: the question, and what the decision said and made of it. */
export function reviewAskText(q: Question, draft: Decision, status: RuleStatus): string {
  const ev = draft.evidence.length ? ` citing ${draft.evidence.map(evidenceText).join('; ')}` : '';
  return `${askText(q)} A first decision answered ${draft.answer ? 'yes' : 'no'} (p=${round(draft.probability)})${ev}, because: ${draft.reason}; the rule would be ${status.replace(/_/g, ' ')}. Judge it yourself.`;
}

function evidenceText(e: Evidence): string {
  return `turn ${e.turn}${e.quote ? ` "${cut(e.quote, 120)}"` : ''}`;
}

function round(p: number): string {
  return (Math.round(p * 100) / 100).toString();
}

function json(v: unknown): string {
  if (v === null || v === undefined) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function cut(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
