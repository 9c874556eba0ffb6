/**
 * A line diff as the list of places where `to` differs from `from`: the smallest edit script
 * (Myers' O(ND) algorithm, the one git uses by default), so the three-way merge lines up the
 * same way `git merge-file` does on edits that are apart.
 */

/** `from[start, end)` is replaced by `lines` (an insertion has start === end, a deletion no lines). */
export interface Hunk {
  start: number;
  end: number;
  lines: string[];
}

/** A file as its lines (without their "\n") and whether its last line ends with one. */
export interface Lines {
  lines: string[];
  newlineAtEnd: boolean;
}

/**
 * Splits a file into lines. The newline at the end is kept apart rather than as part of the
 * last line, so that adding or removing it is not an edit of that line (it merges with an edit
 * there), and joining gives the file back byte for byte.
 */
export function splitLines(text: string): Lines {
  const newlineAtEnd = text.endsWith('\n');
  if (text === '') return { lines: [], newlineAtEnd };
  return { lines: (newlineAtEnd ? text.slice(0, -1) : text).split('\n'), newlineAtEnd };
}

export function joinLines({ lines, newlineAtEnd }: Lines): string {
  return lines.length === 0 ? '' : lines.join('\n') + (newlineAtEnd ? '\n' : '');
}

export function diffLines(from: readonly string[], to: readonly string[]): Hunk[] {
  // The common head and tail never take part: trimming them keeps the search to the edited middle.
  let head = 0;
  while (head < from.length && head < to.length && from[head] === to[head]) head++;
  let tail = 0;
  while (tail < from.length - head && tail < to.length - head && from[from.length - 1 - tail] === to[to.length - 1 - tail]) tail++;
  const a = from.slice(head, from.length - tail);
  const b = to.slice(head, to.length - tail);
  const hunks: Hunk[] = [];
  let open: Hunk | undefined;
  // Walks the edit script, joining consecutive deletions and insertions into one hunk.
  for (const op of editScript(a, b)) {
    if (op.kind === 'keep') {
      if (open) hunks.push(open);
      open = undefined;
      continue;
    }
    open ??= { start: head + op.ai, end: head + op.ai, lines: [] };
    if (op.kind === 'delete') open.end = head + op.ai + 1;
    else open.lines.push(b[op.bi]);
  }
  if (open) hunks.push(open);
  return hunks;
}

type Op = { kind: 'keep' | 'delete' | 'insert'; ai: number; bi: number };

/** Myers' greedy forward search with the trace kept, then walked back into a script. */
function editScript(a: readonly string[], b: readonly string[]): Op[] {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = n === 0 && m === 0;
  for (let d = 0; d <= max && !found; d++) {
    // Round d reads diagonals -d-1 .. d+1 only: keeping just those makes the trace O(D^2), not O(D(N+M)).
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      // Prefer a deletion before an insertion when both reach as far (git's order in a hunk).
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
  }
  const ops: Op[] = [];
  let x = n;
  let y = m;
  // trace[d] is the furthest reach of each diagonal before round d.
  for (let d = trace.length - 1; d >= 0 && (x > 0 || y > 0); d--) {
    const prev = trace[d];
    const at = (k: number) => prev[k + d + 1];
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      ops.push({ kind: 'keep', ai: x, bi: y });
    }
    if (d > 0) {
      if (x === prevX) ops.push({ kind: 'insert', ai: x, bi: prevY });
      else ops.push({ kind: 'delete', ai: prevX, bi: y });
    }
    x = prevX;
    y = prevY;
  }
  return ops.reverse();
}
