/**
 * A finding's excerpt in the review queue: the first quote of its evidence (the agent's own
 * words, or the tool call), else its reason, on one line and at most `max` characters.
 */
export const EXCERPT_MAX_CHARS = 200;

export function excerpt(evidence: readonly { quote?: string | null }[], reason: string | null, max = EXCERPT_MAX_CHARS): string {
  const quote = evidence.find((e) => typeof e.quote === 'string' && e.quote.trim() !== '')?.quote;
  const s = (quote ?? reason ?? '').replace(/\s+/g, ' ').trim();
  return s.length <= max ? s : `${s.slice(0, max - 1).trimEnd()}…`;
}
