import type { Evidence } from './body';
import type { LockRule } from './lock';
import type { Session, ToolCall } from './session';

/**
 * A step with `[tool: X]` read from the session's tool calls, when it has any (the seed: "A
 * step with tool: x and required is checked against the session's tool_calls when it has
 * any. Called is done; not called is skipped, unless the session never reached the step or
 * it didn't apply."). Without tool calls the transcript decides (a model), as it does for a
 * tool step that isn't required and wasn't called: it may have been done another way.
 *
 * One call is one step's: when a tool serves several steps (an email quote, then an email
 * receipt), each call of it counts for one of them (stepCalls). `calls` is that assignment for
 * the step's procedure; without it the step is read alone.
 *
 * Returns null when the tool calls don't decide the step.
 */
export function fromToolCalls(
  rule: LockRule,
  session: Session,
  calls: ReadonlyMap<string, ToolCall | null> = stepCalls([rule], session),
): { done: boolean; evidence: Evidence[]; reason: string } | null {
  if (rule.kind !== 'step' || !rule.tool || !session.tool_calls.length) return null;
  const call = calls.get(rule.rule_id) ?? null;
  if (call) {
    return {
      done: true,
      evidence: [{ turn: call.turn, quote: callQuote(call.tool, call.input), source: 'tool_calls' }],
      reason: `${rule.tool} was called at turn ${call.turn}.`,
    };
  }
  if (!rule.required) return null;
  const called = session.tool_calls.some((c) => c.tool === rule.tool);
  return { done: false, evidence: [], reason: called ? `${rule.tool} was not called for this step: each of its calls counts for an earlier step.` : `${rule.tool} was never called.` };
}

/**
 * Which call is each tool step's (rule_id -> call, null when none is left): in step order,
 * each tool step takes the earliest call of its tool, by turn (then as sent), that an earlier
 * step has not taken, at or after the turn of the call the tool step before it took; only when
 * there is none after, the earliest left before (a step done out of order keeps its call). So a
 * tool called once counts for its first step only, a call made again (a retry) is not taken for
 * a later step when a call after the steps between comes, and calls sent out of turn order are
 * read in turn order.
 */
export function stepCalls(rules: readonly LockRule[], session: Session): Map<string, ToolCall | null> {
  const byTool = new Map<string, ToolCall[]>();
  for (const c of session.tool_calls) {
    const list = byTool.get(c.tool);
    if (list) list.push(c);
    else byTool.set(c.tool, [c]);
  }
  for (const list of byTool.values()) list.sort((a, b) => a.turn - b.turn); // stable: ties as sent
  const taken = new Set<ToolCall>();
  const out = new Map<string, ToolCall | null>();
  const steps = rules.filter((r) => r.kind === 'step' && r.tool).sort((a, b) => a.index - b.index);
  let after = -Infinity;
  for (const r of steps) {
    const left = (byTool.get(r.tool!) ?? []).filter((c) => !taken.has(c));
    const call = left.find((c) => c.turn >= after) ?? left[0] ?? null;
    out.set(r.rule_id, call);
    if (call) {
      taken.add(call);
      after = call.turn;
    }
  }
  return out;
}

const QUOTE_MAX = 200;

function callQuote(tool: string, input: unknown): string {
  const args = input === null || input === undefined ? '' : ` ${JSON.stringify(input)}`;
  const q = `${tool}${args}`;
  return q.length > QUOTE_MAX ? `${q.slice(0, QUOTE_MAX - 1)}…` : q;
}
