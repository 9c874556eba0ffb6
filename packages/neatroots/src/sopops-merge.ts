import * as fs from 'node:fs';
import * as path from 'node:path';
import { merge } from '@neatroots/review-domain';
import { UsageError } from './args';
import type { Command, Io } from './cli';

/**
 * `sopops merge BASE CURRENT SUGGESTED`: the three-way line merge behind a suggestion's
 * freshness, on files. The merged file goes to standard output byte for byte; conflicts are
 * one JSON line, `{"conflicts":[{"line","base","current","suggested"}]}`.
 */
export const mergeCommand: Command = {
  usage: 'sopops merge BASE CURRENT SUGGESTED',
  summary: 'three-way line merge of a procedure file (a suggestion written against BASE, the file now is CURRENT)',
  help: `Merges the edit SUGGESTED makes to BASE into CURRENT (the file as it is now), the way a
suggestion's freshness is worked out, and prints the merged file.

Edits on different lines merge, neighbouring lines included (unlike git merge-file); the same
lines changed two ways, or two insertions at the same place, conflict; the same change made on
both sides is made once. Whether the file ends with a newline is kept from the side that changed it.

Exit status: 0 with the merged file on standard output; 1 on a conflict, with
{"conflicts":[{"line":N,"base":[...],"current":[...],"suggested":[...]}]} on standard output
(line: where the part starts in CURRENT); 2 for a file that cannot be read.`,
  flags: {},
  async run(p, io) {
    if (p.positional.length !== 3) throw new UsageError(`needs three files (BASE CURRENT SUGGESTED), got ${p.positional.length}`);
    const texts: string[] = [];
    for (const [role, file] of zip(['BASE', 'CURRENT', 'SUGGESTED'], p.positional)) {
      try {
        texts.push(fs.readFileSync(path.resolve(io.cwd, file), 'utf8'));
      } catch (e) {
        io.err(`sopops merge: cannot read ${role} ${file}: ${(e as Error).message}`);
        return 2;
      }
    }
    const [base, current, suggested] = texts;
    const r = merge(base, current, suggested);
    if (!r.ok) {
      io.out(JSON.stringify({ conflicts: r.conflicts }));
      return 1;
    }
    writeText(io, r.text);
    return 0;
  },
};

/**
 * Writes a file's text unchanged: through `write` when the Io has it; else through `out`,
 * which ends each line itself (a file without a final newline then gains one).
 */
function writeText(io: Io, text: string): void {
  if (io.write) io.write(text);
  else if (text !== '') io.out(text.endsWith('\n') ? text.slice(0, -1) : text);
}

function zip<A, B>(a: readonly A[], b: readonly B[]): Array<[A, B]> {
  return a.map((x, i) => [x, b[i]]);
}
