/**
 * The few pieces of RE2 syntax the pattern checks need to read: quantifiers, escapes and
 * character classes. Not a full parser: RE2 itself decides whether a pattern compiles; these
 * only find where each piece ends, so the checks never mistake `[(a+)]+` or `\(a+\)+` for
 * groups.
 */

export interface Quantifier {
  /** Index just past the quantifier, including a lazy `?` or possessive `+` suffix. */
  end: number;
  min: number;
  max: number;
}

/** The quantifier starting at `i`, if any: `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`. */
export function quantifierAt(p: string, i: number): Quantifier | undefined {
  const c = p[i];
  let end: number;
  let min: number;
  let max: number;
  if (c === '*' || c === '+') {
    end = i + 1;
    min = c === '+' ? 1 : 0;
    max = Infinity;
  } else if (c === '?') {
    end = i + 1;
    min = 0;
    max = 1;
  } else if (c === '{') {
    // RE2 and JS read `a{` or `a{x}` as literals: only a well-formed count is a quantifier.
    const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i, i + 24));
    if (!m) return undefined;
    end = i + m[0].length;
    min = Number(m[1]);
    max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
  } else {
    return undefined;
  }
  if (p[end] === '?' || p[end] === '+') end++;
  return { end, min, max };
}

/** Length of the escape sequence starting with the backslash at `i`. */
export function escapeLength(p: string, i: number): number {
  const n = p[i + 1];
  if (n === undefined) return 1;
  if (n === 'Q') {
    // \Q...\E quotes literally (RE2).
    const e = p.indexOf('\\E', i + 2);
    return e < 0 ? p.length - i : e + 2 - i;
  }
  if ((n === 'p' || n === 'P' || n === 'x' || n === 'u') && p[i + 2] === '{') {
    const e = p.indexOf('}', i + 3);
    return e < 0 ? p.length - i : e + 1 - i;
  }
  if (n === 'p' || n === 'P') return 3; // \pL
  return 2;
}

/** Length of the character class starting with the `[` at `i`. */
export function classLength(p: string, i: number): number {
  let j = i + 1;
  if (p[j] === '^') j++;
  if (p[j] === ']') j++; // a leading ] is a literal
  while (j < p.length && p[j] !== ']') {
    if (p[j] === '\\') j += escapeLength(p, j);
    else if (p[j] === '[' && p[j + 1] === ':') {
      const e = p.indexOf(':]', j + 2);
      j = e < 0 ? j + 1 : e + 2;
    } else j++;
  }
  return j + 1 - i;
}

/** `(?i)`, `(?s-m)`...: flags, not a group. Returns its length, or 0. */
export function flagsLength(p: string, i: number): number {
  if (p[i] !== '(' || p[i + 1] !== '?') return 0;
  const m = /^\(\?[a-zA-Z-]*\)/.exec(p.slice(i, i + 16));
  return m ? m[0].length : 0;
}

/**
 * Whether a pattern asserts the start of the text (`^`, `\A`) or its end (`$`, `\z`), outside
 * character classes and escapes. Conservative: `^` and `$` count under `(?m)` too, where they
 * would only mean a line's. A pattern with neither finds a match in a text wherever it finds one
 * in a part of it that lies between line breaks (or the text's edges): `\b` reads a line break as
 * it reads an edge, so a part's matches are all matches of the whole (engine/plan.ts).
 */
export function edgeAssertions(p: string): { start: boolean; end: boolean } {
  let start = false;
  let end = false;
  for (let i = 0; i < p.length; ) {
    const c = p[i];
    if (c === '\\') {
      const n = p[i + 1];
      if (n === 'A') start = true;
      else if (n === 'z') end = true;
      i += escapeLength(p, i);
    } else if (c === '[') {
      i += classLength(p, i);
    } else {
      if (c === '^') start = true;
      else if (c === '$') end = true;
      i++;
    }
  }
  return { start, end };
}
