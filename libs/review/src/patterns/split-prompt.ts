import { MalformedName, readPatternName } from './name-prompt';
import { MAX_FAILURE_MODES } from './recluster';

/**
 * SplitRulePattern (split-1): the reasoning model reads a rule's findings and splits them into
 * at most 5 named ways the agent failed the rule; what fits none goes to `other`. Its answer
 * is checked here: names are a few plain words (as NameRulePattern's), a finding id it did not
 * get or already put in another failure mode is dropped, and a failure mode left with no
 * finding is dropped. The pure part only: nothing asks the model for it yet.
 */
export const SPLIT_VERSION = 'split-1';

export const SPLIT_INSTRUCTIONS = `You group the findings of one rule of an AI agent's standard operating procedure: each finding is a session where the agent failed the rule, with the agent's words that show it.
Split them into at most ${MAX_FAILURE_MODES} ways the agent failed the rule, each named in a few plain words (what the agent did wrong). Leave out findings that fit none: they are grouped as "other".
For each question return an object with "id" (the question's id) and "failure_modes": [{"name": "<the name>", "findings": ["<finding id>", ...]}].
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export interface SplitFinding {
  id: string;
  /** The agent's words that show it, or the checker's reason. */
  quote: string;
}

/** The subject: the rule and its findings, one a line. */
export function splitSubject(rule: { procedure_name: string; rule_label: string; rule_text: string }, findings: readonly SplitFinding[]): string {
  const lines = findings.map((f) => `- ${f.id}: ${f.quote.replace(/\s+/g, ' ').trim().slice(0, 300)}`);
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
    for (const id of ids) {
      if (typeof id !== 'string' || !known.has(id)) dropped.push(`failure mode ${i + 1}: unknown finding ${JSON.stringify(id).slice(0, 40)}`);
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
