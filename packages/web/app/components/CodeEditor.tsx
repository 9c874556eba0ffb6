import { useRef } from 'react';
import { Ext } from './Ext';

/** A problem found in the text, at its line when it has one (a check's field, a sopc error). */
export interface LineProblem {
  line?: number;
  /** What is wrong, as the API says it (the field first for a check). */
  text: string;
}

/**
 * A plain text editor with line numbers, where the lines with a problem are marked ✕ and the
 * problems are listed under it, each a button that puts the cursor on its line. The textarea
 * grows with the text (no scrolling of its own), so the gutter stays beside its lines.
 */
export function CodeEditor({
  label,
  value,
  onChange,
  problems,
  minRows = 12,
}: {
  label: string;
  value: string;
  onChange(v: string): void;
  problems: LineProblem[];
  minRows?: number;
}) {
  const area = useRef<HTMLTextAreaElement>(null);
  const lines = value.split('\n');
  const bad = new Set(problems.map((p) => p.line).filter((l): l is number => l !== undefined));
  const goTo = (line: number) => {
    const el = area.current;
    if (!el) return;
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    el.focus();
    el.setSelectionRange(start, start + (lines[line - 1]?.length ?? 0));
  };
  return (
    <div className="code-editor">
      <div className="code">
        <pre className="gutter" aria-hidden="true">
          {lines.map((_, i) => (
            <span key={i} className={bad.has(i + 1) ? 'bad-line' : undefined} data-line={i + 1}>
              {bad.has(i + 1) ? '✕ ' : ''}
              {i + 1}
              {'\n'}
            </span>
          ))}
        </pre>
        <textarea
          ref={area}
          aria-label={label}
          aria-invalid={problems.length > 0}
          spellCheck={false}
          wrap="off"
          rows={Math.max(minRows, lines.length + 1)}
          value={value}
          onChange={(e) => onChange(e.target.value)}
        />
      </div>
      {problems.length > 0 && (
        <ul className="plain problems" aria-label="Problems">
          {problems.map((p, i) => (
            <li key={i} className="error">
              {p.line !== undefined ? (
                <button type="button" className="link" onClick={() => goTo(p.line!)}>
                  line {p.line}
                </button>
              ) : (
                <span className="meta">no line</span>
              )}
              : <Ext text>{p.text}</Ext>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
