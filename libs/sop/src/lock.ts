import type { Compiled } from './types';

/**
 * lock.json, what `sopc export` writes: procedures sorted by id, each with its rules (steps,
 * nevers, warning signs); agents sorted by name with their procedures (own, then groups', each
 * once) and compiled instructions. Key order is fixed so the file diffs cleanly. `action` (a
 * warning sign's `-> ...`, else null) follows the rule fields of the format.
 */
export interface LockRule {
  rule_id: string;
  kind: 'step' | 'never' | 'warning';
  index: number;
  text: string;
  tool: string | null;
  required: boolean;
  when: string | null;
  action: string | null;
}

export interface LockProcedure {
  procedure_id: string;
  name: string;
  version: string;
  goal: string | null;
  applies_when: string | null;
  rules: LockRule[];
}

export interface LockAgent {
  agent: string;
  procedures: string[];
  instructions: string;
}

export interface Lock {
  procedures: LockProcedure[];
  agents: LockAgent[];
}

export function toLock(c: Compiled): Lock {
  const byName = <T>(key: (t: T) => string) => (a: T, b: T) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
  return {
    procedures: [...c.procedures].sort(byName((p) => p.procedure_id)).map((p) => ({
      procedure_id: p.procedure_id,
      name: p.name,
      version: p.version,
      goal: p.goal,
      applies_when: p.applies_when,
      rules: p.rules.map((r) => ({
        rule_id: r.rule_id,
        kind: r.kind,
        index: r.index,
        text: r.text,
        tool: r.tool,
        required: r.required,
        when: r.when,
        action: r.action,
      })),
    })),
    agents: [...c.agents].sort(byName((a) => a.agent)).map((a) => ({ agent: a.agent, procedures: a.procedures, instructions: a.instructions })),
  };
}

/** lock.json's text: two-space JSON and a final newline. */
export function lockText(c: Compiled): string {
  return `${JSON.stringify(toLock(c), null, 2)}\n`;
}
