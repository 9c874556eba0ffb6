import type { Evidence } from '../body';
import type { Session } from '../session';

/** A quote shorter than both of these (`e`, `the`, `$14`) shows nothing of what the agent said, unless it is the whole turn. */
export const MIN_QUOTE_WORDS = 3;
export const MIN_QUOTE_CHARS = 12;

/**
 * A violated never rule must quote the agent's own words. A quote counts when it appears
 * (case and whitespace aside) in an agent turn: the turn it names, or, when it names none or
 * the wrong one, the first agent turn that has it (the evidence is corrected to that turn).
 * It must say something: at least MIN_QUOTE_WORDS words or MIN_QUOTE_CHARS characters, or the
 * whole of a shorter agent turn (`Yes.`, punctuation at its ends aside). A letter or a common
 * word is in every transcript, so it shows nothing. Quotes of the user, of tool output, of
 * nothing at all, and too short to show anything are dropped.
 */
export function agentQuotes(evidence: readonly Evidence[], session: Session): Evidence[] {
  const out: Evidence[] = [];
  for (const e of evidence) {
    if (e.source !== 'transcript' || !e.quote || !norm(e.quote)) continue;
    const q = norm(e.quote);
    const long = words(q) >= MIN_QUOTE_WORDS || q.length >= MIN_QUOTE_CHARS;
    const has = (i: number) => {
      const t = session.turns[i];
      if (t?.role !== 'agent') return false;
      const text = norm(t.text);
      return long ? text.includes(q) : bare(text) !== '' && bare(text) === bare(q);
    };
    const turn = has(e.turn) ? e.turn : session.turns.findIndex((_t, i) => has(i));
    if (turn >= 0) out.push({ turn, quote: e.quote, source: 'transcript' });
  }
  return out;
}

function norm(s: string): string {
  return s.replace(/\s+/g, ' ').trim().toLowerCase();
}

/** Words: runs of text with a letter or a digit in them (a lone dash or `&` is none). */
function words(s: string): number {
  return s.split(' ').filter((w) => /[\p{L}\p{N}]/u.test(w)).length;
}

/** The text without the punctuation at its ends: `Yes.` is the whole of the turn `yes`. */
function bare(s: string): string {
  return s.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, '');
}
