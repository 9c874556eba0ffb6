import { Fragment, type ReactNode } from 'react';
import { shownText } from '../format';

/**
 * Text with every occurrence of `quote` (and of each of `quotes`) marked: a question finding's
 * words in the span, a rule's evidence in a session's turn. Where two quotes start at the same
 * place the longer is marked; marks never overlap. An agent's or a model's text: isolated, its
 * reordering bidi controls shown (components/Ext.tsx), once the quotes are found in it as sent.
 */
export function Highlight({ text, quote, quotes }: { text: string; quote?: string | null; quotes?: readonly (string | null | undefined)[] }) {
  const wanted = [...new Set([quote, ...(quotes ?? [])])].filter((q): q is string => !!q && text.includes(q)).sort((a, b) => b.length - a.length);
  if (!wanted.length) return <bdi>{shownText(text)}</bdi>;
  const parts: ReactNode[] = [];
  let plainFrom = 0;
  for (let i = 0; i < text.length; ) {
    const q = wanted.find((w) => text.startsWith(w, i));
    if (!q) {
      i++;
      continue;
    }
    if (i > plainFrom) parts.push(shownText(text.slice(plainFrom, i)));
    parts.push(<mark className="quote">{shownText(q)}</mark>);
    i += q.length;
    plainFrom = i;
  }
  if (plainFrom < text.length) parts.push(shownText(text.slice(plainFrom)));
  return (
    <bdi>
      {parts.map((p, i) => (
        <Fragment key={i}>{p}</Fragment>
      ))}
    </bdi>
  );
}

/** Whether a span's text holds the quote (which span a question finding's quote is in). */
export function holdsQuote(texts: string[], quote: string | null): boolean {
  return !!quote && texts.some((t) => t.includes(quote));
}
