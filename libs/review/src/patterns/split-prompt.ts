import { MalformedName, readPatternName } from './name-prompt';
import { MAX_FAILURE_MODES } from './recluster';

/**
 * SplitRulePattern (split-2): the reasoning model reads a rule's findings and splits them into
 * at most 5 named ways the agent failed the rule; what fits none goes to `other`. The findings
 * are shown numbered f1, f2, ... (in the order given) and the answer lists those numbers, not
 * the finding ids: an answer that places 200 findings stays short enough to be written whole
 * (split-1 asked for the ids, 25 characters each, and its answers were cut at the token limit
 * from about 40 findings on). splitAnswerTokens is the budget the answer is given. Its answer
 * is checked here: names are a few plain words (as NameRulePattern's), a finding it did not get
 * or already put in another failure mode is dropped, and a failure mode left with no finding is
 * dropped.
 */
export const SPLIT_VERSION = 'split-2';

export const SPLIT_INSTRUCTIONS = `You group the findings of one rule of an AI agent's standard operating procedure: each finding is a session where the agent failed the rule, with the agent's words that show it.
Split them into at most ${MAX_FAILURE_MODES} ways the agent failed the rule, each named in a few plain words (what the agent did wrong). Leave out findings that fit none: they are grouped as "other".
Each finding is numbered f1, f2, ...: list findings by that number.
For each question return an object with "id" (the question's id) and "failure_modes": [{"name": "<the name>", "findings": ["f1", "f4", ...]}].
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export interface SplitFinding {
  id: string;
  /** The agent's words that show it, or the checker's reason. */
  quote: string;
}

/** The number a finding is shown under: f1 for the first given. */
export const findingRef = (index: number): string => `f${index + 1}`;

/**
 * The tokens a split's answer is given (DecisionItem.max_tokens): every finding listed once
 * (a number such as "f123", and its separator, is at most 8 tokens written any way), and each
 * failure mode's name and keys. 1,900 for 200 findings.
 */
export function splitAnswerTokens(findings: number): number {
  return 300 + 8 * findings;
}

/** The subject: the rule and its findings, one a line, numbered (findingRef). */
export function splitSubject(rule: { procedure_name: string; rule_label: string; rule_text: string }, findings: readonly SplitFinding[]): string {
  const lines = findings.map((f, i) => `- ${findingRef(i)}: ${f.quote.replace(/\s+/g, ' ').trim().slice(0, 300)}`);
  return `Procedure "${rule.procedure_name}", ${rule.rule_label}: "${rule.rule_text.replace(/\s+/g, ' ').trim()}"\nFindings:\n${lines.join('\n')}`;
}

export const SPLIT_ASK = 'Split these findings into the ways the agent failed the rule.';

export interface SplitResult {
  failure_modes: { name: string; findings: string[] }[];
  /** The findings no failure mode took. */
  other: string[];
  /** What was dropped from the answer and why (for the log). */
  dropped: string[];
}

export class MalformedSplit extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedSplit';
  }
}

/**
 * The id behind a finding the answer names: its number (f3: the third given), or the id itself
 * should the model write one; undefined when it names neither.
 */
export function resolveRef(ref: unknown, ids: readonly string[], known: ReadonlySet<string>, prefix: string): string | undefined {
  if (typeof ref !== 'string') return undefined;
  const m = new RegExp(`^${prefix}(\\d+)$`, 'i').exec(ref.trim());
  if (m) {
    const i = Number(m[1]) - 1;
    return i >= 0 && i < ids.length ? ids[i] : undefined;
  }
  return known.has(ref) ? ref : undefined;
}

/** The split in the answer, findings given by number (findingRef) in the order of `findingIds`. */
export function readSplit(answer: unknown, findingIds: readonly string[]): SplitResult {
  const modes = answer && typeof answer === 'object' && !Array.isArray(answer) ? (answer as Record<string, unknown>).failure_modes : undefined;
  if (!Array.isArray(modes)) throw new MalformedSplit('the answer has no "failure_modes" list');
  const known = new Set(findingIds);
  const taken = new Set<string>();
  const dropped: string[] = [];
  const out: SplitResult['failure_modes'] = [];
  for (const [i, m] of modes.entries()) {
    if (out.length === MAX_FAILURE_MODES) {
      dropped.push(`failure mode ${i + 1}: more than ${MAX_FAILURE_MODES}`);
      continue;
    }
    const o = (m ?? {}) as Record<string, unknown>;
    let name: string;
    try {
      name = readPatternName(o);
    } catch (err) {
      if (!(err instanceof MalformedName)) throw err;
      dropped.push(`failure mode ${i + 1}: ${err.message}`);
      continue;
    }
    const ids = Array.isArray(o.findings) ? o.findings : [];
    const mine: string[] = [];
    for (const ref of ids) {
      const id = resolveRef(ref, findingIds, known, 'f');
      if (id === undefined) dropped.push(`failure mode ${i + 1}: unknown finding ${JSON.stringify(ref).slice(0, 40)}`);
      else if (taken.has(id)) dropped.push(`failure mode ${i + 1}: ${id} is already in another`);
      else {
        taken.add(id);
        mine.push(id);
      }
    }
    if (mine.length) out.push({ name, findings: mine });
    else dropped.push(`failure mode ${i + 1} ("${name}"): no finding`);
  }
  return { failure_modes: out, other: findingIds.filter((id) => !taken.has(id)), dropped };
}
