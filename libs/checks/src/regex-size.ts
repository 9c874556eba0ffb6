import { classLength, escapeLength, flagsLength, quantifierAt } from './regex-syntax';

/**
 * How big a pattern's compiled program is, estimated from its text without compiling it.
 *
 * RE2 runs in time linear in the text, but the factor is the size of the compiled program:
 * when its DFA gives up (counted repeats of overlapping classes do that quickly) it falls
 * back to simulating the program, byte by byte, over every instruction that is alive. So
 * `([a-z]{1,1000}x)` fifty times, 863 characters, is about 100,000 instructions and takes
 * seconds on a 200,000-character span. Counts multiply (`(a{100}){100}` is 10,000 copies),
 * which is why the estimate works on the parsed nesting, not the length.
 *
 * The figures per piece follow RE2's compiler closely enough to be an upper bound in
 * practice: one instruction per ASCII literal or range, a few more for a character that is
 * several bytes in UTF-8, about 8 for `.` and negated classes (the UTF-8 byte ranges of
 * "anything else"), and 64 for Unicode classes such as `\p{L}`, which compile to long
 * range lists.
 */

/** What the estimate found: the program size and the largest count `{n,m}` asks for. */
export interface PatternSize {
  /** Estimated RE2 instructions. */
  size: number;
  /** The largest single repetition count, and where it is. */
  maxCount: number;
  maxCountAt?: string;
}

const DOT = 8;
const NEGATED = 8;
const UNICODE_CLASS = 64;

interface Frame {
  /** Instructions of the finished branches (alternation). */
  alts: number;
  branches: number;
  /** Instructions of the branch being read. */
  sum: number;
  capture: boolean;
  /** Where the group opened (for naming a count in a reason). */
  start: number;
}

/** Instructions for a literal character (UTF-8 bytes). */
function literalSize(ch: string): number {
  const cp = ch.codePointAt(0) ?? 0;
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

function escapeSize(p: string, i: number, len: number): number {
  const n = p[i + 1];
  if (n === 'p' || n === 'P') return UNICODE_CLASS;
  if (n === 'D' || n === 'W' || n === 'S' || n === 'C') return NEGATED;
  if (n === 'd') return 1;
  if (n === 's') return 3;
  if (n === 'w') return 4;
  if (n === 'Q') {
    // \Q...\E: each quoted character is a literal.
    let s = 0;
    for (const ch of p.slice(i + 2, i + len).replace(/\\E$/, '')) s += literalSize(ch);
    return Math.max(s, 1);
  }
  return 1;
}

function classSize(p: string, i: number, len: number): number {
  const body = p.slice(i + 1, i + len - 1);
  if (body.startsWith('^')) return NEGATED;
  if (/\\[pP]|\[:/.test(body)) return UNICODE_CLASS;
  let s = 0;
  for (let j = 0; j < body.length; j++) {
    const ch = body[j];
    if (ch === '\\') {
      const l = escapeLength(body, j);
      s += escapeSize(body, j, l);
      j += l - 1;
    } else if (ch === '-' && j > 0 && j < body.length - 1) {
      // a range: one instruction for both ends
      j++;
    } else s += literalSize(ch);
  }
  return Math.max(1, s);
}

/** The size of a piece repeated `q.min` to `q.max` times (RE2 copies the piece per count). */
function repeated(size: number, min: number, max: number): number {
  if (max === Infinity) return size * Math.max(1, min) + 1;
  // `x{n,m}` is n copies, then m-n optional ones (one split instruction each).
  return size * max + (max - min);
}

/**
 * Estimates a pattern's program size and finds its largest repetition count. Reads the
 * text once; a pattern that does not parse (RE2 will say why) still gets an estimate.
 */
export function estimatePatternSize(p: string): PatternSize {
  const frames: Frame[] = [{ alts: 0, branches: 1, sum: 0, capture: false, start: 0 }];
  let lastSize = 0;
  let lastStart = -1;
  let maxCount = 0;
  let maxCountAt: string | undefined;
  let i = 0;
  const top = () => frames[frames.length - 1];
  while (i < p.length) {
    const q = lastStart >= 0 ? quantifierAt(p, i) : undefined;
    if (q) {
      const f = top();
      f.sum += repeated(lastSize, q.min, q.max) - lastSize;
      // Only written counts: `+` and `*` have none to blame.
      for (const n of p[i] === '{' ? [q.min, q.max] : []) {
        if (n !== Infinity && n > maxCount) {
          maxCount = n;
          maxCountAt = p.slice(lastStart, q.end);
        }
      }
      lastStart = -1;
      i = q.end;
      continue;
    }
    const c = p[i];
    let piece = 0;
    const start = i;
    if (c === '\\') {
      const len = escapeLength(p, i);
      piece = escapeSize(p, i, len);
      i += len;
    } else if (c === '[') {
      const len = classLength(p, i);
      piece = classSize(p, i, len);
      i += len;
    } else if (c === '(') {
      const flags = flagsLength(p, i);
      if (flags) {
        i += flags;
        lastStart = -1;
        continue;
      }
      frames.push({ alts: 0, branches: 1, sum: 0, capture: p[i + 1] !== '?' || p[i + 2] === 'P' || p[i + 2] === '<', start: i });
      lastStart = -1;
      i++;
      continue;
    } else if (c === ')') {
      if (frames.length === 1) {
        i++;
        continue;
      }
      const f = frames.pop()!;
      const size = f.alts + f.sum + (f.branches - 1) + (f.capture ? 2 : 0);
      top().sum += size;
      lastSize = size;
      lastStart = f.start;
      i++;
      continue;
    } else if (c === '|') {
      const f = top();
      f.alts += f.sum;
      f.sum = 0;
      f.branches++;
      lastStart = -1;
      i++;
      continue;
    } else if (c === '.') {
      piece = DOT;
      i++;
    } else if (c === '^' || c === '$') {
      piece = 1;
      i++;
    } else {
      const ch = String.fromCodePoint(p.codePointAt(i)!);
      piece = literalSize(ch);
      i += ch.length;
    }
    top().sum += piece;
    lastSize = piece;
    lastStart = start;
  }
  while (frames.length > 1) {
    const f = frames.pop()!;
    top().sum += f.alts + f.sum + (f.branches - 1) + (f.capture ? 2 : 0);
  }
  const root = frames[0];
  return { size: root.alts + root.sum + (root.branches - 1) + 2, maxCount, maxCountAt };
}
