import { collapse } from './ids';

/**
 * A list item's trailing annotation: `[tool: NAME, required, when: CONDITION]`, one pair of
 * brackets, comma-separated entries. A condition may itself contain commas, so a part that
 * starts no known entry continues the `when:` before it; anywhere else it is an unknown
 * annotation (an error, so a typo such as `[requird]` is never silently read as text). Nor is
 * an annotation anywhere but at the end: a bracketed group elsewhere in the item whose first
 * entry is a known one (`Place the order [tool: x].`) is an error, not part of the text.
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
    problems.push(...misplaced(text));
    return { body: text, annotation: null, problems };
  }
  const body = collapse(text.slice(0, m.index));
  if (TRAILING.test(body) && looksAnnotation(TRAILING.exec(body)![1])) {
    problems.push('annotations go in one pair of brackets: [tool: NAME, required, when: CONDITION]');
    problems.push(...misplaced(body.slice(0, TRAILING.exec(body)!.index)));
  } else {
    problems.push(...misplaced(body));
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

const GROUP = /\[([^[\]]*)\]/g;
const SHOWN_MAX = 80;

/** A bracketed group's inside whose first entry is a known one: meant as an annotation. */
function looksAnnotation(inside: string): boolean {
  return ENTRY.test(collapse(inside.split(',')[0]));
}

/** The annotations in `text`, which is not the end of its item: each one an error. */
function misplaced(text: string): string[] {
  return [...text.matchAll(GROUP)]
    .filter((g) => looksAnnotation(g[1]))
    .map((g) => `annotation not at the end of the item: "${g[0].length > SHOWN_MAX ? `${g[0].slice(0, SHOWN_MAX - 1)}…` : g[0]}" (annotations go last)`);
}
