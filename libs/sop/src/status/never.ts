import type { Session } from '../session';
import type { NeverObservation } from './observation';
import { agentQuotes } from './quotes';
import { join, type Derived } from './steps';

/**
 * violated, ok, or not_checked. "A violated never rule always quotes the agent's own words.
 * One the model flagged without such a quote is stored as ok, with the reason saying so."
 */
export function neverStatus(o: NeverObservation, session: Session): Derived {
  if (o.violated === null) return { status: 'not_checked', evidence: [], reason: o.reason };
  if (!o.violated) return { status: 'ok', evidence: [], reason: o.reason };
  const quotes = agentQuotes(o.evidence, session);
  if (!quotes.length) {
    return {
      status: 'ok',
      evidence: [],
      reason: join(
        "Stored as ok: it was flagged as violated without quoting the agent's own words.",
        o.reason ? `(The flag said: ${o.reason.replace(/^Decided: /, '')})` : '',
      ),
    };
  }
  return { status: 'violated', evidence: quotes, reason: o.reason };
}
