import type { Evidence } from './body';
import type { LockRule } from './lock';
import type { Session } from './session';

/**
 * A step with `[tool: X]` read from the session's tool calls, when it has any (the seed: "A
 * step with tool: x and required is checked against the session's tool_calls when it has
 * any. Called is done; not called is skipped, unless the session never reached the step or
 * it didn't apply."). Without tool calls the transcript decides (a model), as it does for a
 * tool step that isn't required and wasn't called: it may have been done another way.
 *
 * Returns null when the tool calls don't decide the step.
 */
export function fromToolCalls(rule: LockRule, session: Session): { done: boolean; evidence: Evidence[]; reason: string } | null {
  if (rule.kind !== 'step' || !rule.tool || !session.tool_calls.length) return null;
  const first = session.tool_calls.find((c) => c.tool === rule.tool);
  if (first) {
    return {
      done: true,
      evidence: [{ turn: first.turn, quote: callQuote(first.tool, first.input), source: 'tool_calls' }],
      reason: `${rule.tool} was called at turn ${first.turn}.`,
    };
  }
  if (!rule.required) return null;
  return { done: false, evidence: [], reason: `${rule.tool} was never called.` };
}

const QUOTE_MAX = 200;

function callQuote(tool: string, input: unknown): string {
  const args = input === null || input === undefined ? '' : ` ${JSON.stringify(input)}`;
  const q = `${tool}${args}`;
  return q.length > QUOTE_MAX ? `${q.slice(0, QUOTE_MAX - 1)}…` : q;
}
