/** Text with every occurrence of `quote` marked (a question finding's words in the span). */
export function Highlight({ text, quote }: { text: string; quote?: string | null }) {
  if (!quote || !text.includes(quote)) return <>{text}</>;
  const parts = text.split(quote);
  return (
    <>
      {parts.map((p, i) => (
        <span key={i}>
          {p}
          {i < parts.length - 1 && <mark className="quote">{quote}</mark>}
        </span>
      ))}
    </>
  );
}

/** Whether a span's text holds the quote (which span a question finding's quote is in). */
export function holdsQuote(texts: string[], quote: string | null): boolean {
  return !!quote && texts.some((t) => t.includes(quote));
}
