/** A piece of a text as the pages mark it: the quote it is, or plain text. */
export interface QuotePart {
  text: string;
  quote: boolean;
}

/**
 * A text cut into plain pieces and occurrences of the quotes, as sent (case and whitespace as
 * they are). Where two quotes start at the same place the longer is marked; marks never overlap
 * (past a mark the search starts again after it). Each quote's next occurrence is found with
 * indexOf and kept until passed, so a long text with a long quote takes one pass per quote, not a
 * comparison at every character (a 1 MB span with a 2,000-character quote froze the page for
 * seconds). An empty list when no quote is in the text.
 */
export function quoteParts(text: string, quotes: readonly (string | null | undefined)[]): QuotePart[] {
  const wanted = [...new Set(quotes)].filter((q): q is string => !!q && text.includes(q)).sort((a, b) => b.length - a.length);
  if (!wanted.length) return [];
  // Where each quote next starts at or after `from` (-1: nowhere further).
  const next = wanted.map((w) => text.indexOf(w));
  const parts: QuotePart[] = [];
  let from = 0;
  for (;;) {
    let at = -1;
    let which = -1;
    for (let k = 0; k < wanted.length; k++) {
      if (next[k] !== -1 && next[k] < from) next[k] = text.indexOf(wanted[k], from);
      // Longest first: a later (shorter) quote wins only by starting earlier.
      if (next[k] !== -1 && (at === -1 || next[k] < at)) {
        at = next[k];
        which = k;
      }
    }
    if (at === -1) break;
    if (at > from) parts.push({ text: text.slice(from, at), quote: false });
    parts.push({ text: wanted[which], quote: true });
    from = at + wanted[which].length;
  }
  if (from < text.length) parts.push({ text: text.slice(from), quote: false });
  return parts;
}
