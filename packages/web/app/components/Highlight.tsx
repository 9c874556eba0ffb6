import { Fragment, useMemo } from 'react';
import { shownText } from '../format';
import { quoteParts } from '../quotes';

/**
 * Text with every occurrence of `quote` (and of each of `quotes`) marked: a question finding's
 * words in the span, a rule's evidence in a session's turn. Where two quotes start at the same
 * place the longer is marked; marks never overlap. An agent's or a model's text: isolated, its
 * reordering bidi controls shown (components/Ext.tsx), once the quotes are found in it as sent.
 */
export function Highlight({ text, quote, quotes }: { text: string; quote?: string | null; quotes?: readonly (string | null | undefined)[] }) {
  // Found once for a text and its quotes, not again on every render of the page around it.
  const quotesKey = JSON.stringify([quote ?? null, ...(quotes ?? [])]);
  const shownParts = useMemo(() => {
    const parts = quoteParts(text, JSON.parse(quotesKey) as (string | null)[]);
    if (!parts.length) return shownText(text);
    return parts.map((p, i) => (p.quote ? <mark key={i} className="quote">{shownText(p.text)}</mark> : <Fragment key={i}>{shownText(p.text)}</Fragment>));
  }, [text, quotesKey]);
  return <bdi>{shownParts}</bdi>;
}

/** Whether a span's text holds the quote (which span a question finding's quote is in). */
export function holdsQuote(texts: string[], quote: string | null): boolean {
  return !!quote && texts.some((t) => t.includes(quote));
}
