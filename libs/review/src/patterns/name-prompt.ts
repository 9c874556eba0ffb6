import { NAME_MAX_CHARS } from './names';

/**
 * NameRulePattern: the reasoning model names a rule pattern once, when it is created (or on
 * `sopops patterns rename`): what the agent did wrong, in a few plain words. name-1 is the
 * prompt version; each answer is `{"id", "name"}`, read leniently (a bare string, quotes and a
 * trailing period stripped) and refused when it is not a short phrase, so a bad answer keeps
 * the rule-text name rather than showing reviewers a paragraph.
 */
export const NAME_VERSION = 'name-1';

/** Words a name may have: "a few plain words". */
export const NAME_MAX_WORDS = 8;

export const NAME_INSTRUCTIONS = `You name patterns of mistakes that AI agents make against their standard operating procedures. Each pattern gathers the findings on one rule of a procedure.
Name what the agent did wrong, in a few plain words (at most ${NAME_MAX_WORDS}), the way a support lead would say it: "Quoted prices unprompted", "Skipped the address check". Not the rule itself, no quotes, no final period.
For each question return an object with "id" (the question's id) and "name" (the name).
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export interface NameSubject {
  procedure_name: string;
  /** "Step 3", "Never rule 2", "Warning sign 1". */
  rule_label: string;
  rule_text: string;
}

/** The subject: the procedure and the rule (what reviewers would read to name it themselves). */
export function nameSubject(s: NameSubject): string {
  return `Procedure "${s.procedure_name}", ${s.rule_label}: "${s.rule_text.replace(/\s+/g, ' ').trim()}"`;
}

/** The question; "broken" reads differently for a step (not done) and a never rule (done). */
export function nameAsk(s: NameSubject): string {
  const wrong = /^Never/.test(s.rule_label) ? 'did what this rule forbids' : /^Warning/.test(s.rule_label) ? 'did not respond to this warning sign as it says' : 'did not do this step';
  return `The agent ${wrong}. Name what the agent did wrong.`;
}

export class MalformedName extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedName';
  }
}

const OPENING_QUOTES = `"'“‘\``;
const CLOSING_QUOTES = `"'”’\``;
/** Stripped from a name's end: a final period and the like (whitespace is one space by then). */
const TRAILING = ' .!,;:';

/**
 * The name on one line without its wrapping quotes and final punctuation. Scanned by hand: a
 * backtracking pattern (/[\s.!,;:]+$/) took seconds on an answer of many dots, and blocked the
 * process meanwhile.
 */
function trimName(raw: string): string {
  const s = raw.replace(/\s+/g, ' ').trim();
  let from = 0;
  let to = s.length;
  while (from < to && OPENING_QUOTES.includes(s[from])) from++;
  while (to > from && CLOSING_QUOTES.includes(s[to - 1])) to--;
  while (to > from && TRAILING.includes(s[to - 1])) to--;
  return s.slice(from, to).trim();
}

/** The name from the model's answer, trimmed; MalformedName when it is not a few plain words. */
export function readPatternName(answer: unknown): string {
  const raw = typeof answer === 'string' ? answer : answer && typeof answer === 'object' && !Array.isArray(answer) ? (answer as Record<string, unknown>).name : undefined;
  if (typeof raw !== 'string') throw new MalformedName('the answer has no "name" string');
  const name = trimName(raw);
  if (!name) throw new MalformedName('the name is empty');
  if (/[\n{}<>]/.test(raw)) throw new MalformedName('the name is not plain words');
  const words = name.split(' ').length;
  if (words > NAME_MAX_WORDS) throw new MalformedName(`the name has ${words} words (at most ${NAME_MAX_WORDS})`);
  if (name.length > NAME_MAX_CHARS) throw new MalformedName(`the name has ${name.length} characters (at most ${NAME_MAX_CHARS})`);
  return name.charAt(0).toUpperCase() + name.slice(1);
}
