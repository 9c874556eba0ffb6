import { Ext } from './Ext';

/** A unified diff, each line coloured by what it does (and marked with its +/- for those who cannot see colour). */
export function UnifiedDiff({ text, label }: { text: string; label?: string }) {
  const lines = text.replace(/\n$/, '').split('\n');
  const classes = lineClasses(lines);
  return (
    <pre className="diff" aria-label={label}>
      {lines.map((l, i) => (
        <span key={i} className={classes[i]}>
          <Ext text>{l}</Ext>
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

const HUNK = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/;

/**
 * What each line of a unified diff is. `---`, `+++` and `diff ` are a file's header only
 * between hunks: inside a hunk (as long as its `@@ -a,b +c,d @@` says) a line is what its first
 * character says, so a removed YAML `---` (printed `----`) is a removed line, not a header.
 */
function lineClasses(lines: readonly string[]): string[] {
  // The old and new lines the current hunk still has.
  let old = 0;
  let now = 0;
  return lines.map((l) => {
    if (old > 0 || now > 0) {
      // "\ No newline at end of file" is about the line before it.
      if (l.startsWith('\\')) return 'd-ctx';
      if (l.startsWith('-')) {
        old--;
        return 'd-del';
      }
      if (l.startsWith('+')) {
        now--;
        return 'd-add';
      }
      old--;
      now--;
      return 'd-ctx';
    }
    const hunk = HUNK.exec(l);
    if (hunk) {
      // A range without its length is one line long.
      old = hunk[1] === undefined ? 1 : Number(hunk[1]);
      now = hunk[2] === undefined ? 1 : Number(hunk[2]);
      return 'd-hunk';
    }
    if (l.startsWith('@@')) return 'd-hunk';
    if (l.startsWith('+++') || l.startsWith('---') || l.startsWith('diff ')) return 'd-file';
    return l.startsWith('+') ? 'd-add' : l.startsWith('-') ? 'd-del' : 'd-ctx';
  });
}
