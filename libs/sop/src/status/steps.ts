import type { Evidence, RuleStatus, StepStatus } from '../body';
import { outOfOrder } from './out-of-order';
import type { StepObservation } from './observation';

export interface Derived {
  status: RuleStatus;
  evidence: Evidence[];
  reason: string;
}

/**
 * Step statuses from what was observed (the seed's table):
 *   not_applicable  its condition never arose;
 *   done            done, in order;
 *   out_of_order    done, but after a later step (the fewest such, out-of-order.ts);
 *   skipped         not done, and a later step was: the session went past where it belonged;
 *   not_reached     not done, and no later step was: the session ended before it;
 *   not_checked     nobody could tell whether it was done (or, if it was not, whether it applied).
 * How far the session got is the last step done (out of order included), with or without an
 * evidence turn: a model's "done" often names no turn, or one out of range that the checker
 * drops. Only the out-of-order check needs turns, so it reads the done steps that have one.
 */
export function stepStatuses(obs: readonly StepObservation[]): Derived[] {
  const firstTurn = (o: StepObservation) => (o.evidence.length ? Math.min(...o.evidence.map((e) => e.turn)) : null);
  const placed = obs
    .filter((o) => o.done === true && firstTurn(o) !== null)
    .map((o) => ({ index: o.rule.index, turn: firstTurn(o)! }));
  const marked = outOfOrder(placed);
  const lastDone = Math.max(0, ...obs.filter((o) => o.done === true).map((o) => o.rule.index));

  return obs.map((o): Derived => {
    const base = { evidence: o.evidence };
    if (o.done === true) {
      const turn = firstTurn(o);
      if (turn !== null && marked.has(o.rule.index)) {
        return { ...base, status: 'out_of_order' satisfies StepStatus, reason: join(o.reason, outOfOrderReason(o.rule.index, turn, placed)) };
      }
      return { ...base, status: 'done', reason: o.reason };
    }
    if (o.applies === false) return { ...base, status: 'not_applicable', reason: o.reason };
    if (o.done === null || o.applies === null) return { ...base, status: 'not_checked', reason: o.reason };
    if (lastDone > o.rule.index) {
      return { ...base, status: 'skipped', reason: join(o.reason, `Step ${lastDone} was done later in the procedure, so the session went past it.`) };
    }
    return { ...base, status: 'not_reached', reason: join(o.reason, 'No later step was done: the session ended before it.') };
  });
}

function outOfOrderReason(index: number, turn: number, placed: { index: number; turn: number }[]): string {
  const later = placed.filter((p) => p.index > index && p.turn < turn).sort((a, b) => a.turn - b.turn)[0];
  if (later) return `Done at turn ${turn}, after step ${later.index} (turn ${later.turn}), which comes later in the procedure.`;
  const earlier = placed.filter((p) => p.index < index && p.turn > turn).sort((a, b) => b.turn - a.turn)[0];
  if (!earlier) return `Done at turn ${turn}, out of the procedure's order.`; // unreachable: a marked step always conflicts
  return `Done at turn ${turn}, before step ${earlier.index} (turn ${earlier.turn}), which comes earlier in the procedure.`;
}

export function join(a: string, b: string): string {
  return a ? `${a} ${b}` : b;
}
