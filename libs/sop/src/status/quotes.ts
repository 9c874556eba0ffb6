import type { Evidence } from '../body';
import type { Session } from '../session';

/**
 * A violated never rule must quote the agent's own words. A quote counts when it appears
 * (case and whitespace aside) in an agent turn: the turn it names, or, when it names none or
 * the wrong one, the first agent turn that has it (the evidence is corrected to that turn).
 * Quotes of the user, of tool output or of nothing at all are dropped.
 */
export function agentQuotes(evidence: readonly Evidence[], session: Session): Evidence[] {
  const out: Evidence[] = [];
  for (const e of evidence) {
    if (e.source !== 'transcript' || !e.quote || !norm(e.quote)) continue;
    const q = norm(e.quote);
    const has = (i: number) => session.turns[i]?.role === 'agent' && norm(session.turns[i].text).includes(q);
    const turn = has(e.turn) ? e.turn : session.turns.findIndex((_t, i) => has(i));
    if (turn >= 0) out.push({ turn, quote: e.quote, source: 'transcript' });
  }
  return out;
}

function norm(s: string): string {
  return s.replace(/\s+/g, ' ').trim().toLowerCase();
}
