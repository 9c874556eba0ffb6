import { diffLines, joinLines, splitLines, type Hunk } from './line-diff';

export interface MergeConflict {
  /** The part's first line in `current` (1-based); for a part with no lines now, the line it comes before. */
  line: number;
  base: string[];
  current: string[];
  suggested: string[];
}

export type MergeResult = { ok: true; text: string } | { ok: false; conflicts: MergeConflict[] };

type Side = 'current' | 'suggested';
interface Edit extends Hunk {
  side: Side;
  group: number;
}

/**
 * The three-way line merge behind a suggestion's freshness: the suggestion was written against
 * `base`, the procedure's file is `current` now, and `suggested` is the suggestion's file.
 *
 * Edits on different lines merge, neighbouring lines included: unlike `git merge-file`, an edit
 * that only touches another (line 3 changed here, line 4 there, or a line inserted right before
 * or after a changed one) is not a conflict, because procedure items are one line each and a
 * suggestion usually rewords one item next to one that was edited by hand. The same lines changed
 * two ways, or two insertions at the same place, conflict; the same change made on both sides is
 * made once.
 */
export function merge(base: string, current: string, suggested: string): MergeResult {
  const b = splitLines(base);
  const c = splitLines(current);
  const s = splitLines(suggested);
  const baseLines = b.lines;
  const ours = diffLines(baseLines, c.lines).map((h): Edit => ({ ...h, side: 'current', group: -1 }));
  const theirs = diffLines(baseLines, s.lines).map((h): Edit => ({ ...h, side: 'suggested', group: -1 }));
  const out: string[] = [];
  const conflicts: MergeConflict[] = [];
  let at = 0; // next base line not yet written
  let currentLine = 0; // lines of `current` covered so far
  for (const part of overlappingParts(ours, theirs)) {
    const start = Math.min(...part.map((e) => e.start));
    const end = Math.max(...part.map((e) => e.end));
    for (; at < start; at++, currentLine++) out.push(baseLines[at]);
    const mine = applyWithin(baseLines, start, end, part.filter((e) => e.side === 'current'));
    const yours = applyWithin(baseLines, start, end, part.filter((e) => e.side === 'suggested'));
    const oneSided = part.every((e) => e.side === part[0].side);
    if (oneSided || sameLines(mine, yours)) {
      out.push(...(part[0].side === 'current' || !oneSided ? mine : yours));
    } else {
      conflicts.push({
        line: currentLine + 1,
        base: baseLines.slice(start, end),
        current: mine,
        suggested: yours,
      });
      out.push(...mine);
    }
    currentLine += mine.length;
    at = end;
  }
  for (; at < baseLines.length; at++) out.push(baseLines[at]);
  if (conflicts.length > 0) return { ok: false, conflicts };
  // Whether the file ends with a newline is one more three-way choice: the side that changed it wins.
  const newlineAtEnd = c.newlineAtEnd !== b.newlineAtEnd ? c.newlineAtEnd : s.newlineAtEnd;
  return { ok: true, text: joinLines({ lines: out, newlineAtEnd }) };
}

/**
 * Two edits overlap when they change a base line in common, when both insert at the same place,
 * or when one inserts strictly inside the lines the other replaces. Touching ranges don't.
 */
function overlaps(x: Hunk, y: Hunk): boolean {
  const xEmpty = x.start === x.end;
  const yEmpty = y.start === y.end;
  if (xEmpty && yEmpty) return x.start === y.start;
  if (xEmpty) return y.start < x.start && x.start < y.end;
  if (yEmpty) return x.start < y.start && y.start < x.end;
  return x.start < y.end && y.start < x.end;
}

/**
 * Groups the two sides' edits into parts, each closed under overlap (an edit on one side can
 * join two of the other's), in file order. One side's own edits never overlap or touch: a diff
 * keeps at least one common line between them.
 */
function overlappingParts(ours: Edit[], theirs: Edit[]): Edit[][] {
  const parent = [...ours, ...theirs].map((_, i) => i);
  const find = (i: number): number => (parent[i] === i ? i : (parent[i] = find(parent[i])));
  let first = 0;
  ours.forEach((o, i) => {
    // Both lists are in file order, so the candidates for each of ours start at a moving index.
    while (first < theirs.length && theirs[first].end < o.start) first++;
    for (let j = first; j < theirs.length && theirs[j].start <= o.end; j++) {
      if (overlaps(o, theirs[j])) parent[find(i)] = find(ours.length + j);
    }
  });
  const parts = new Map<number, Edit[]>();
  [...ours, ...theirs].forEach((e, i) => {
    const root = find(i);
    const part = parts.get(root);
    if (part) part.push(e);
    else parts.set(root, [e]);
  });
  const key = (p: Edit[]) => {
    const start = Math.min(...p.map((e) => e.start));
    const end = Math.max(...p.map((e) => e.end));
    // At one place, an insertion goes before an edit of the lines that follow it.
    return [start, end === start ? 0 : 1];
  };
  return [...parts.values()].sort((a, b) => {
    const [as, ae] = key(a);
    const [bs, be] = key(b);
    return as - bs || ae - be;
  });
}

/** One side's text for base lines [start, end), with its edits in that range applied. */
function applyWithin(base: string[], start: number, end: number, edits: Edit[]): string[] {
  const lines: string[] = [];
  let at = start;
  for (const e of [...edits].sort((a, b) => a.start - b.start)) {
    lines.push(...base.slice(at, e.start), ...e.lines);
    at = e.end;
  }
  lines.push(...base.slice(at, end));
  return lines;
}

function sameLines(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((l, i) => l === b[i]);
}
