/**
 * The compiled shapes of a procedures folder (procedures/<id>.md, agents/<name>.yaml,
 * groups/<name>.yaml). lock.json is these, serialised (see lock.ts); the checker reads them.
 */

export type RuleKind = 'step' | 'never' | 'warning';
export const RULE_KINDS: readonly RuleKind[] = ['step', 'never', 'warning'];

export interface Rule {
  /** Derived from kind and text alone (ids.ts): the same wording keeps its id everywhere. */
  rule_id: string;
  kind: RuleKind;
  /** Counts from 1 within its kind, in file order. */
  index: number;
  /** The item without number or bullet, annotation or `-> action`, whitespace collapsed. */
  text: string;
  /** `[tool: NAME]`: the tool whose call is the step's evidence. Steps only. */
  tool: string | null;
  /** `[required]`: skipping it makes the procedure deviated whatever the goal. Steps only. */
  required: boolean;
  /** `[when: CONDITION]`: the step applies only when this arose. Steps only. */
  when: string | null;
  /** A warning sign's `-> ...`: what to do when it comes up. Warning signs only. */
  action: string | null;
  /** The line of the item in its file (1-based); not part of lock.json. */
  line: number;
}

export interface Procedure {
  procedure_id: string;
  /** The `#` title. */
  name: string;
  /** A hash of the file's content (ids.ts). */
  version: string;
  goal: string | null;
  applies_when: string | null;
  /** Steps, then nevers, then warning signs, each in file order. */
  rules: Rule[];
}

export interface Agent {
  agent: string;
  /** Its own procedures, then its groups', in order, each once. */
  procedures: string[];
  /** instructions with its procedures compiled in (instructions.ts). */
  instructions: string;
  /** The instructions as written in agents/<name>.yaml. */
  own_instructions: string;
  groups: string[];
}

export interface Group {
  group: string;
  procedures: string[];
}

/** One problem in a folder: FILE (relative to the folder, with /), 1-based LINE, message. */
export interface Issue {
  file: string;
  line: number;
  message: string;
}

export interface Compiled {
  /** Sorted by procedure_id. */
  procedures: Procedure[];
  /** Sorted by name. */
  agents: Agent[];
  /** Sorted by name. */
  groups: Group[];
  /** Every problem found, sorted by file then line; empty when the folder compiles. */
  errors: Issue[];
}

export function formatIssue(i: Issue): string {
  return `${i.file}:${i.line}: ${i.message}`;
}
