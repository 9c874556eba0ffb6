import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { unifiedDiff, unifiedDiffFiles } from './unified-diff';

/** Applies a diff with the system's `patch`, as a user applying "unpublished changes" would. */
function applyWithPatch(oldText: string, diff: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'udiff-'));
  try {
    writeFileSync(path.join(dir, 'f'), oldText);
    writeFileSync(path.join(dir, 'd.patch'), diff);
    execFileSync('patch', ['-s', '-f', path.join(dir, 'f'), path.join(dir, 'd.patch')], { stdio: 'pipe' });
    return readFileSync(path.join(dir, 'f'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const procedure = `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Confirm the delivery address. [when: the caller wants delivery]
4. Read the order back to the caller. [required]

## Never
- Volunteer a price or a description of a dish.
`;

describe('unifiedDiff', () => {
  it('prints diff -u hunks with line numbers and three lines of context', () => {
    const edited = procedure.replace('4. Read the order back to the caller. [required]', '4. Read the whole order back to the caller. [required]');
    expect(unifiedDiff(procedure, edited, { from: 'a/procedures/take-order.md', to: 'b/procedures/take-order.md' })).toBe(
      [
        '--- a/procedures/take-order.md',
        '+++ b/procedures/take-order.md',
        '@@ -5,7 +5,7 @@',
        ' 1. Greet the caller with the name of the restaurant.',
        ' 2. Look up the account of the caller. [tool: lookup_account, required]',
        ' 3. Confirm the delivery address. [when: the caller wants delivery]',
        '-4. Read the order back to the caller. [required]',
        '+4. Read the whole order back to the caller. [required]',
        ' ',
        ' ## Never',
        ' - Volunteer a price or a description of a dish.',
        '',
      ].join('\n'),
    );
    expect(unifiedDiff(procedure, procedure)).toBe('');
  });

  it('gives what `patch` turns the old file into the new one with, for any edit', () => {
    const line = fc.constantFrom('a', 'b', 'c', 'step 1', 'step 2', '', '## Never', '- x');
    const file = fc.tuple(fc.array(line, { maxLength: 25 }), fc.boolean()).map(([ls, nl]) => (ls.length ? ls.join('\n') + (nl ? '\n' : '') : ''));
    fc.assert(
      fc.property(file, file, (a, b) => {
        const d = unifiedDiff(a, b);
        if (a === b) return d === '';
        return applyWithPatch(a, d) === b;
      }),
      { numRuns: 60 },
    );
  });

  it('lists added, changed and removed files of a folder', () => {
    const before = new Map([['procedures/a.md', 'one\n'], ['groups/g.yaml', 'procedures: [a]\n']]);
    const after = new Map([['procedures/a.md', 'one\ntwo\n'], ['agents/x.yaml', 'procedures: [a]\n']]);
    const d = unifiedDiffFiles(before, after);
    expect(d).toContain('--- /dev/null\n+++ b/agents/x.yaml\n@@ -0,0 +1 @@\n+procedures: [a]\n');
    expect(d).toContain('--- a/groups/g.yaml\n+++ /dev/null\n@@ -1 +0,0 @@\n-procedures: [a]\n');
    expect(d).toContain('--- a/procedures/a.md\n+++ b/procedures/a.md\n@@ -1 +1,2 @@\n one\n+two\n');
    expect(d.indexOf('agents/x.yaml')).toBeLessThan(d.indexOf('groups/g.yaml'));
  });
});
