import { compileFiles } from '@neatroots/sop';
import { unifiedDiff } from './unified-diff';

export interface PlannedAgent {
  agent: string;
  /** Lines added to and removed from its compiled instructions. */
  added: number;
  removed: number;
  /** A unified diff of its compiled instructions (agents/<name> before and after). */
  diff: string;
}

/**
 * plan.agents: every agent whose compiled instructions the edit changes, with a diff. Compiles
 * the folder before and after (sopc's own compileInstructions, so the diff is what the agent
 * would be told), in agent name order. An agent that only appears after, or only before, is
 * diffed against nothing.
 */
export function planAgents(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): PlannedAgent[] {
  const was = new Map(compileFiles(before).agents.map((a) => [a.agent, a.instructions]));
  const now = new Map(compileFiles(after).agents.map((a) => [a.agent, a.instructions]));
  const names = [...new Set([...was.keys(), ...now.keys()])].sort();
  const out: PlannedAgent[] = [];
  for (const name of names) {
    const a = was.get(name) ?? '';
    const b = now.get(name) ?? '';
    if (a === b) continue;
    const diff = unifiedDiff(a, b, { from: `a/agents/${name}`, to: `b/agents/${name}` });
    const body = diff.split('\n').filter((l) => !l.startsWith('--- ') && !l.startsWith('+++ '));
    out.push({ agent: name, added: body.filter((l) => l.startsWith('+')).length, removed: body.filter((l) => l.startsWith('-')).length, diff });
  }
  return out;
}
