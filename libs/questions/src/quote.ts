import type { SpanSummary } from './types';

/**
 * The second look's quote check (the seed: "it must quote the words in the run that show the
 * problem, the quote must really be there"). Models copy text loosely: they drop JSON escapes,
 * change spacing and curly quotes, and shorten with an ellipsis. Those differences are
 * forgiven; a word that is not in the run is not.
 */

/** Shorter than this (after normalising) proves nothing: "a" or "ok" is in every run. */
export const MIN_QUOTE_CHARS = 4;

export function normalizeForQuote(s: string): string {
  return s
    .toLowerCase()
    .replace(/\\[nrt]/g, ' ')
    .replace(/\\(["'\\/])/g, '$1')
    .replace(/[\u2018\u2019\u201a\u201b`]/g, "'")
    .replace(/[\u201c\u201d\u201e\u201f]/g, '"')
    .replace(/[\u2013\u2014]/g, '-')
    .replace(/\s+/g, '');
}

/**
 * normalizeForQuote of texts joined by newlines is the texts normalized one by one and put
 * together: a newline is whitespace (dropped), takes no part in an escape, and ends a word for
 * lower-casing. So a span's text is normalized once while its summary lives, however many
 * answers look for a quote in it.
 */
const spanTexts = new WeakMap<SpanSummary, string>();

/** normalizeForQuote of a span's input, output and error (those set) joined by newlines. */
export function spanQuoteText(s: SpanSummary): string {
  let text = spanTexts.get(s);
  if (text === undefined) {
    text = '';
    for (const f of [s.input, s.output, s.error]) if (f) text += normalizeForQuote(String(f));
    spanTexts.set(s, text);
  }
  return text;
}

const WRAPPING_QUOTES = `"'\u201c\u201d\u2018\u2019\``;

/** The quote without the quote marks and spaces around it. */
function stripWrapping(q: string): string {
  // Scanned by hand: a backtracking pattern (/["'...]+$/, stripped over and over) took seconds
  // on a model's quote with a long run of quote marks, and blocked the process meanwhile.
  const wraps = (c: string) => WRAPPING_QUOTES.includes(c) || c.trim() === '';
  let from = 0;
  let to = q.length;
  while (from < to && wraps(q[from])) from++;
  while (to > from && wraps(q[to - 1])) to--;
  return q.slice(from, to);
}

/** The quote's pieces (split at ellipses), normalised; empty when there is nothing to check. */
export function quoteParts(quote: string): string[] {
  return stripWrapping(quote)
    .split(/\.\.\.|\u2026|\[\.\.\.\]/)
    .map((p) => normalizeForQuote(stripWrapping(p)))
    .filter((p) => p.length > 0);
}

/** Whether every piece of the quote appears in the run's text, in order. */
export function quoteFound(quote: string | undefined, runText: string, normalizedRun?: string | (() => string)): boolean {
  if (!quote) return false;
  const parts = quoteParts(quote);
  if (parts.reduce((n, p) => n + p.length, 0) < MIN_QUOTE_CHARS) return false;
  const hay = typeof normalizedRun === 'function' ? normalizedRun() : (normalizedRun ?? normalizeForQuote(runText));
  let from = 0;
  for (const p of parts) {
    const at = hay.indexOf(p, from);
    if (at < 0) return false;
    from = at + p.length;
  }
  return true;
}
