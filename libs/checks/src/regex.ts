import RE2 from 're2';
import { estimatePatternSize, type PatternSize } from './regex-size';
import { classLength, escapeLength, flagsLength, quantifierAt } from './regex-syntax';

/**
 * `match` patterns: RE2 syntax, checked when a check is loaded or saved.
 *
 * RE2 runs in time linear in the text, but two things still make a pattern dangerous. Its
 * factor is the compiled program's size, so a long pattern or a large count makes every
 * character expensive: the bounds below keep both small, and they are checked on the text
 * before RE2 compiles anything. And the patterns also reach engines that backtrack (the
 * app's check editor previews them in the browser, people copy them into other tools): the
 * seed promises that a pattern that "nests repeats like (a+)+ and could freeze neatroots"
 * is rejected on save. Neither check catches every slow pattern, so the patterns people
 * write also run under a time limit off the event loop (match/).
 */

/** A pattern that cannot be used: too long, too big once compiled, not RE2, or it nests repeats. */
export class PatternError extends Error {
  constructor(
    readonly pattern: string,
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'PatternError';
  }
}

/**
 * The bounds a pattern must keep. The text limit comes first because RE2 takes time to
 * compile a long pattern (a 2 MB one stalls for over a second); the program size bounds what
 * matching can cost per character (see regex-size.ts); the count bound names the usual
 * culprit directly (`{1,1000}`) instead of the size it leads to.
 */
export interface PatternBounds {
  /** Characters of pattern text. */
  maxChars: number;
  /** Estimated RE2 instructions. */
  maxProgram: number;
  /** The largest n or m in `{n,m}`. */
  maxCount: number;
}

export const DEFAULT_PATTERN_BOUNDS: Readonly<PatternBounds> = Object.freeze({ maxChars: 2000, maxProgram: 2000, maxCount: 200 });

/** Throws PatternError when the pattern is over one of the bounds; reads the text once, never compiles. */
export function checkPatternBounds(pattern: string, bounds: PatternBounds = DEFAULT_PATTERN_BOUNDS): PatternSize {
  if (pattern.length > bounds.maxChars) {
    throw new PatternError(pattern, `is ${pattern.length} characters long; the limit is ${bounds.maxChars}`);
  }
  const est = estimatePatternSize(pattern);
  if (est.maxCount > bounds.maxCount) {
    throw new PatternError(
      pattern,
      `repeats something ${est.maxCount} times (${clip(est.maxCountAt ?? '')}); the limit is ${bounds.maxCount}: ` +
        `use + or * for "any number", or a smaller count`,
    );
  }
  if (est.size > bounds.maxProgram) {
    throw new PatternError(
      pattern,
      `compiles to about ${est.size} instructions; the limit is ${bounds.maxProgram} (counted repeats multiply the ` +
        `pattern: {1,100} copies its part 100 times, and \\p{...} classes are large): use smaller counts or + and *`,
    );
  }
  return est;
}

function clip(s: string): string {
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

/**
 * Compiles an RE2 pattern after checking its bounds, rejecting nested repeats; throws
 * PatternError with the reason.
 */
export function compileSafe(pattern: string, bounds: PatternBounds = DEFAULT_PATTERN_BOUNDS): RE2 {
  if (typeof pattern !== 'string' || pattern === '') throw new PatternError(String(pattern), 'must be a non-empty RE2 pattern');
  checkPatternBounds(pattern, bounds);
  let re: RE2;
  try {
    re = new RE2(pattern);
  } catch (e) {
    throw new PatternError(pattern, `does not compile as an RE2 pattern: ${(e as Error).message}`);
  }
  const nested = findNestedRepeat(pattern);
  if (nested !== undefined) {
    throw new PatternError(
      pattern,
      `nests repeats (${nested}), which could freeze a backtracking engine; repeat the inner part only, ` +
        `or make the group match a fixed separator`,
    );
  }
  return re;
}

/**
 * Finds a group repeated without bound whose body itself contains a repeat (`(a+)+`,
 * `(a*)*`, `(\w+\s?)*`, `(?:x+){2,}`, `((a+)b)+`). Returns that part of the pattern, or
 * undefined. `(ab)+`, `a+b+` and bounded outer counts such as `(\d{1,3}\.){3}` pass: a
 * bounded outer repeat costs polynomial time at worst, not exponential.
 */
export function findNestedRepeat(p: string): string | undefined {
  // One frame per open group: does its body repeat anything?
  const frames: { start: number; repeats: boolean }[] = [{ start: 0, repeats: false }];
  let last: { group: true; start: number; repeats: boolean } | { group: false } | undefined;
  let i = 0;
  while (i < p.length) {
    const c = p[i];
    const q = last ? quantifierAt(p, i) : undefined;
    if (q) {
      if (last?.group && last.repeats && q.max === Infinity) return p.slice(last.start, q.end);
      if (q.max > 1) frames[frames.length - 1].repeats = true;
      last = { group: false };
      i = q.end;
      continue;
    }
    if (c === '\\') {
      i += escapeLength(p, i);
      last = { group: false };
    } else if (c === '[') {
      i += classLength(p, i);
      last = { group: false };
    } else if (c === '(') {
      const flags = flagsLength(p, i);
      if (flags) {
        // (?i) and friends set flags; they are not a group and cannot be repeated.
        i += flags;
        last = undefined;
        continue;
      }
      frames.push({ start: i, repeats: false });
      last = undefined;
      i++;
    } else if (c === ')') {
      const f = frames.length > 1 ? frames.pop()! : { start: 0, repeats: false };
      const parent = frames[frames.length - 1];
      if (f.repeats) parent.repeats = true;
      last = { group: true, start: f.start, repeats: f.repeats };
      i++;
    } else if (c === '|') {
      last = undefined;
      i++;
    } else {
      last = { group: false };
      i++;
    }
  }
  return undefined;
}
