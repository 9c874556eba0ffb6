import { performance } from 'node:perf_hooks';
import RE2 from 're2';

/**
 * `match` patterns (CONTRACTS.md section 2): RE2 syntax, checked when a check is loaded or
 * saved, and run under a time budget per span.
 *
 * RE2 itself runs in linear time, but the patterns also reach engines that backtrack (the
 * app's check editor previews them in the browser, and people copy them into other tools),
 * and the seed promises that a pattern that "nests repeats like (a+)+ and could freeze
 * neatroots" is rejected on save. The detector catches that common shape, not every slow
 * pattern, so the budget below is the second line of defence.
 */

/** A pattern that cannot be used: it does not compile under RE2, or it nests repeats. */
export class PatternError extends Error {
  constructor(
    readonly pattern: string,
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'PatternError';
  }
}

/** Compiles an RE2 pattern, rejecting nested repeats; throws PatternError with the reason. */
export function compileSafe(pattern: string): RE2 {
  if (typeof pattern !== 'string' || pattern === '') throw new PatternError(String(pattern), 'must be a non-empty RE2 pattern');
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

interface Quantifier {
  /** Index just past the quantifier, including a lazy `?` or possessive `+` suffix. */
  end: number;
  max: number;
}

/** The quantifier starting at `i`, if any: `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`. */
function quantifierAt(p: string, i: number): Quantifier | undefined {
  const c = p[i];
  let end: number;
  let max: number;
  if (c === '*' || c === '+') {
    end = i + 1;
    max = Infinity;
  } else if (c === '?') {
    end = i + 1;
    max = 1;
  } else if (c === '{') {
    // RE2 and JS read `a{` or `a{x}` as literals: only a well-formed count is a quantifier.
    const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i, i + 24));
    if (!m) return undefined;
    end = i + m[0].length;
    max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
  } else {
    return undefined;
  }
  if (p[end] === '?' || p[end] === '+') end++;
  return { end, max };
}

/** Length of the escape sequence starting with the backslash at `i`. */
function escapeLength(p: string, i: number): number {
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
  return 2;
}

/** Length of the character class starting with the `[` at `i`. */
function classLength(p: string, i: number): number {
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
      if (p[i + 1] === '?') {
        const flags = /^\(\?[a-zA-Z-]*\)/.exec(p.slice(i, i + 16));
        if (flags) {
          // (?i) and friends set flags; they are not a group and cannot be repeated.
          i += flags[0].length;
          last = undefined;
          continue;
        }
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

/** Where a disabled pattern is reported. */
export interface RegexLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

export const DEFAULT_REGEX_BUDGET_MS = 50;

export interface BudgetedRegexOptions {
  /** The check the pattern belongs to, named in the warning. */
  checkId?: string;
  /** A call slower than this disables the pattern; default 50 ms (the seed's limit per span). */
  budgetMs?: number;
  logger?: RegexLogger;
  /** Milliseconds with sub-millisecond precision; performance.now by default. */
  now?: () => number;
}

/**
 * Patterns disabled in this process, by check id and pattern: the seed says a slow pattern
 * "is skipped with a warning in the log until neatroots restarts", so reloading the checks
 * (a new BudgetedRegex for the same check and pattern) must not turn it back on.
 */
const disabledPatterns = new Map<string, number>();

const consoleLogger: RegexLogger = { warn: (message) => console.warn(message) };

/** A compiled `match` pattern that stops running once a single call exceeds its time budget. */
export class BudgetedRegex {
  readonly pattern: string;
  readonly checkId: string | undefined;
  readonly budgetMs: number;
  private readonly re: RE2;
  private readonly key: string;
  private readonly logger: RegexLogger;
  private readonly now: () => number;

  constructor(pattern: string, opts: BudgetedRegexOptions = {}) {
    this.pattern = pattern;
    this.checkId = opts.checkId;
    this.budgetMs = opts.budgetMs ?? DEFAULT_REGEX_BUDGET_MS;
    this.re = compileSafe(pattern);
    this.key = `${opts.checkId ?? ''}\u0000${pattern}`;
    this.logger = opts.logger ?? consoleLogger;
    this.now = opts.now ?? (() => performance.now());
  }

  /** True once a call has gone over the budget; the pattern then never matches again. */
  get disabled(): boolean {
    return disabledPatterns.has(this.key);
  }

  /** A Buffer (UTF-8) skips the string conversion RE2 does on every call: callers that test
   *  several patterns against one text convert it once. */
  test(text: string | Buffer): boolean {
    if (disabledPatterns.has(this.key)) return false;
    const t0 = this.now();
    const hit = this.re.test(text);
    let ms = this.now() - t0;
    if (ms > this.budgetMs) {
      // Wall-clock time: on a busy machine the thread can be descheduled mid-call. The same
      // text is timed once more, and the pattern is only disabled if it is slow again.
      const t1 = this.now();
      this.re.test(text);
      ms = Math.min(ms, this.now() - t1);
    }
    if (ms > this.budgetMs) {
      disabledPatterns.set(this.key, ms);
      const who = this.checkId ? `check ${this.checkId}` : 'a check';
      this.logger.warn(
        `${who}: pattern ${JSON.stringify(this.pattern)} took ${ms.toFixed(1)} ms on one span (limit ${this.budgetMs} ms); ` +
          `it is skipped until neatroots restarts`,
        { check_id: this.checkId, pattern: this.pattern, ms, budget_ms: this.budgetMs, chars: text.length },
      );
    }
    // The call that ran out of time still has a correct answer; only later calls are skipped.
    return hit;
  }
}
