/** A unified diff, each line coloured by what it does (and marked with its +/- for those who cannot see colour). */
export function UnifiedDiff({ text, label }: { text: string; label?: string }) {
  const lines = text.replace(/\n$/, '').split('\n');
  return (
    <pre className="diff" aria-label={label}>
      {lines.map((l, i) => {
        const cls =
          l.startsWith('+++') || l.startsWith('---') || l.startsWith('diff ') ? 'd-file'
          : l.startsWith('@@') ? 'd-hunk'
          : l.startsWith('+') ? 'd-add'
          : l.startsWith('-') ? 'd-del'
          : 'd-ctx';
        return (
          <span key={i} className={cls}>
            {l}
            {'\n'}
          </span>
        );
      })}
    </pre>
  );
}
