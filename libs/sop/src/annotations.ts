import { collapse } from './ids';

/**
 * A list item's trailing annotation: `[tool: NAME, required, when: CONDITION]`, one pair of
 * brackets, comma-separated entries. A condition may itself contain commas, so a part that
 * starts no known entry continues the `when:` before it; anywhere else it is an unknown
 * annotation (an error, so a typo such as `[requird]` is never silently read as text).
 */
export interface Annotation {
  tool: string | null;
  required: boolean;
  when: string | null;
}

export interface Split {
  /** The item without its annotation, whitespace collapsed. */
  body: string;
  annotation: Annotation | null;
  /** Problems with the annotation, as messages (the caller knows the line). */
  problems: string[];
}

const TRAILING = /\[([^[\]]*)\]\s*$/;
const ENTRY = /^(tool|when)\s*:\s*(.*)$|^(required)$/i;
const UNCLOSED = /\[\s*(tool\s*:|when\s*:|required\b)[^\]]*$/i;

export function splitAnnotation(item: string): Split {
  const text = collapse(item);
  const problems: string[] = [];
  const m = TRAILING.exec(text);
  if (!m) {
    if (UNCLOSED.test(text)) problems.push('annotation without its closing "]"');
    return { body: text, annotation: null, problems };
  }
  const body = collapse(text.slice(0, m.index));
  if (TRAILING.test(body) && ENTRY.test(collapse(TRAILING.exec(body)![1].split(',')[0]))) {
    problems.push('annotations go in one pair of brackets: [tool: NAME, required, when: CONDITION]');
  }
  const annotation: Annotation = { tool: null, required: false, when: null };
  const seen = new Set<string>();
  let last: string | null = null;
  for (const raw of m[1].split(',')) {
    const part = collapse(raw);
    const e = ENTRY.exec(part);
    if (!e) {
      if (last === 'when' && part) {
        annotation.when = `${annotation.when}, ${part}`;
        continue;
      }
      problems.push(part ? `unknown annotation "${part}" (known: tool: NAME, required, when: CONDITION)` : 'empty annotation entry');
      last = null;
      continue;
    }
    const key = (e[1] ?? e[3]).toLowerCase();
    if (seen.has(key)) problems.push(`"${key}" annotated twice`);
    seen.add(key);
    last = key;
    if (key === 'required') annotation.required = true;
    else if (key === 'tool') {
      const name = collapse(e[2]);
      if (!name) problems.push('"tool:" needs a tool name');
      else if (/\s/.test(name)) problems.push(`tool name "${name}" has spaces`);
      annotation.tool = name || null;
    } else {
      const cond = collapse(e[2]);
      if (!cond) problems.push('"when:" needs a condition');
      annotation.when = cond || null;
    }
  }
  return { body, annotation, problems };
}
