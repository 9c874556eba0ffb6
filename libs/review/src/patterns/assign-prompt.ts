/**
 * AssignFailureMode (assign-1): a new finding on a rule already split into failure modes goes
 * to one of them, or to `other`, by a decision (the decision model, else the local LLM). The
 * subject is the rule and its failure modes, numbered from 1, shared by every finding asked
 * about at once (the question service batches them); the ask is the finding. 0 means none fits.
 */
export const ASSIGN_VERSION = 'assign-1';

export const ASSIGN_INSTRUCTIONS = `You sort findings about AI agents into known failure modes. A failure mode is one way the agent failed a rule of its standard operating procedure.
For each question, pick the failure mode the finding is an example of, by its number; 0 when none fits.
For each question return an object with "id" (the question's id) and "mode" (the number).
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export interface AssignRule {
  procedure_name: string;
  rule_label: string;
  rule_text: string;
  /** The rule's active failure modes (not `other`), in the order they are numbered. */
  modes: readonly { name: string; description?: string | null }[];
}

export function assignSubject(r: AssignRule): string {
  const modes = r.modes.map((m, i) => `${i + 1}. ${m.name}${m.description ? ` (${m.description.replace(/\s+/g, ' ').trim().slice(0, 200)})` : ''}`);
  return `Procedure "${r.procedure_name}", ${r.rule_label}: "${r.rule_text.replace(/\s+/g, ' ').trim()}"\nFailure modes:\n${modes.join('\n')}\n0. None of these`;
}

export function assignAsk(quote: string): string {
  return `Which failure mode is this finding an example of? Finding: ${quote.replace(/\s+/g, ' ').trim().slice(0, 300)}`;
}

export class MalformedChoice extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedChoice';
  }
}

/** The chosen failure mode's index (0-based), or null for `other`; MalformedChoice when unreadable. */
export function readModeChoice(answer: unknown, modes: number): number | null {
  const raw = typeof answer === 'number' ? answer : answer && typeof answer === 'object' && !Array.isArray(answer) ? (answer as Record<string, unknown>).mode : undefined;
  const n = typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw new MalformedChoice('the answer has no "mode" number');
  if (n < 0 || n > modes) throw new MalformedChoice(`mode ${n} is not one of 0 to ${modes}`);
  return n === 0 ? null : n - 1;
}
