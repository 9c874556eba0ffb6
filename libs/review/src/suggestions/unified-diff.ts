import { diffLines, splitLines } from './line-diff';

/**
 * Unified diffs, as `diff -u` and git print them: what a workspace's head changes against the
 * live release ("unpublished changes"), and what a procedure file went through since a
 * suggestion was written (its `changes`, given to the model when it is rewritten). Built on
 * the same line diff as the three-way merge, so both agree on what changed.
 */
export function unifiedDiff(oldText: string, newText: string, opts: { from?: string; to?: string; context?: number } = {}): string {
  if (oldText === newText) return '';
  const context = opts.context ?? 3;
  const a = markedLines(oldText);
  const b = markedLines(newText);
  const hunks = diffLines(a, b);
  const out: string[] = [`--- ${opts.from ?? 'a'}`, `+++ ${opts.to ?? 'b'}`];
  // Where each hunk starts in the new file.
  let delta = 0;
  const placed = hunks.map((h) => {
    const p = { ...h, toStart: h.start + delta };
    delta += h.lines.length - (h.end - h.start);
    return p;
  });
  // Hunks whose context would touch are printed as one.
  const groups: (typeof placed)[] = [];
  for (const h of placed) {
    const g = groups[groups.length - 1];
    if (g && h.start - g[g.length - 1].end <= 2 * context) g.push(h);
    else groups.push([h]);
  }
  for (const g of groups) {
    const first = g[0];
    const last = g[g.length - 1];
    const oldFrom = Math.max(0, first.start - context);
    const oldTo = Math.min(a.length, last.end + context);
    const newFrom = first.toStart - (first.start - oldFrom);
    const body: string[] = [];
    let at = oldFrom;
    let newLen = 0;
    for (const h of g) {
      for (; at < h.start; at++, newLen++) body.push(...printed(' ', a[at]));
      for (let i = h.start; i < h.end; i++) body.push(...printed('-', a[i]));
      for (const l of h.lines) body.push(...printed('+', l));
      newLen += h.lines.length;
      at = h.end;
    }
    for (; at < oldTo; at++, newLen++) body.push(...printed(' ', a[at]));
    out.push(`@@ -${range(oldFrom, oldTo - oldFrom)} +${range(newFrom, newLen)} @@`, ...body);
  }
  return out.join('\n') + '\n';
}

// A last line without its newline differs from the same words with one (as in diff -u, where
// it is printed with "\ No newline at end of file"): the mark makes the line diff see that.
const NO_EOL = '\u0000no-eol';

function markedLines(text: string): string[] {
  const { lines, newlineAtEnd } = splitLines(text);
  if (lines.length && !newlineAtEnd) lines[lines.length - 1] += NO_EOL;
  return lines;
}

function printed(sign: string, line: string): string[] {
  return line.endsWith(NO_EOL) ? [`${sign}${line.slice(0, -NO_EOL.length)}`, '\\ No newline at end of file'] : [`${sign}${line}`];
}

/** The diff of a set of files (by path) against another: added, changed and removed files, in path order. */
export function unifiedDiffFiles(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>, context = 3): string {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
  return paths
    .map((p) => {
      const was = before.get(p);
      const now = after.get(p);
      if (was === now) return '';
      return unifiedDiff(was ?? '', now ?? '', { from: was === undefined ? '/dev/null' : `a/${p}`, to: now === undefined ? '/dev/null' : `b/${p}`, context });
    })
    .join('');
}

function range(start: number, len: number): string {
  // diff -u numbers lines from 1; an empty range names the line before it.
  const first = len === 0 ? start : start + 1;
  return len === 1 ? `${first}` : `${first},${len}`;
}
