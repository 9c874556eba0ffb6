import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { merge } from './merge';

/** What `git merge-file` makes of the same three files: the merged text and whether it conflicted. */
function gitMerge(base: string, current: string, suggested: string): { clean: boolean; text: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'review-merge-'));
  try {
    for (const [name, text] of Object.entries({ base, current, suggested })) fs.writeFileSync(path.join(dir, name), text);
    const r = spawnSync('git', ['merge-file', '-p', 'current', 'base', 'suggested'], { cwd: dir, encoding: 'utf8' });
    // git merge-file exits with the number of conflicts; a negative status is an error.
    if (r.status === null || r.status < 0 || r.status > 127) throw new Error(`git merge-file failed: ${r.stderr}`);
    return { clean: r.status === 0, text: r.stdout };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const lines = (...l: string[]) => l.map((x) => `${x}\n`).join('');

const takeOrder = lines(
  '# Take an order',
  'Goal: The order is placed and read back to the caller.',
  'Applies when: The caller wants to order food.',
  '',
  '## Steps',
  '1. Greet the caller with the name of the restaurant.',
  '2. Look up the account of the caller. [tool: lookup_account, required]',
  '3. Confirm the delivery address. [when: the caller wants delivery]',
  '4. Read the order back to the caller. [required]',
  '',
  '## Never',
  '- Volunteer a price or a description of a dish.',
  '',
  '## Warning signs',
  '- The caller sounds upset. -> Offer a callback from the manager.',
);
const edit = (text: string, from: string, to: string) => {
  if (!text.includes(from)) throw new Error(`fixture: ${from} not in text`);
  return text.replace(from, to);
};

describe('merge: agrees with git merge-file on edits that are apart', () => {
  const cases: Array<[string, string, string]> = [
    [
      'a step reworded here, the never rule there',
      edit(takeOrder, '1. Greet the caller with the name', '1. Greet the caller warmly with the name'),
      edit(takeOrder, '- Volunteer a price', '- Quote a price'),
    ],
    [
      'a line inserted here, the goal edited there',
      edit(takeOrder, '- Volunteer a price or a description of a dish.\n', '- Volunteer a price or a description of a dish.\n- Promise a delivery time.\n'),
      edit(takeOrder, 'Goal: The order is placed', 'Goal: The order is placed and paid'),
    ],
    [
      'a line deleted here, the warning sign edited there',
      edit(takeOrder, 'Applies when: The caller wants to order food.\n', ''),
      edit(takeOrder, 'Offer a callback from the manager.', 'Transfer the call to the manager.'),
    ],
    ['the same edit on both sides', edit(takeOrder, '[required]', '[tool: read_back, required]'), edit(takeOrder, '[required]', '[tool: read_back, required]')],
    ['only the suggestion changed anything', takeOrder, edit(takeOrder, 'Greet the caller', 'Welcome the caller')],
    ['only the file changed since', edit(takeOrder, 'Greet the caller', 'Welcome the caller'), takeOrder],
  ];
  it.each(cases)('%s', (_name, current, suggested) => {
    const git = gitMerge(takeOrder, current, suggested);
    expect(git.clean).toBe(true);
    expect(merge(takeOrder, current, suggested)).toEqual({ ok: true, text: git.text });
  });

  it('on generated files with edits, deletions and insertions at least one unchanged line apart', () => {
    const op = fc.oneof(
      { arbitrary: fc.constant(null), weight: 2 },
      { arbitrary: fc.record({ side: fc.constantFrom<Side>('current', 'suggested', 'both'), what: fc.constantFrom<What>('edit', 'delete', 'insert') }), weight: 3 },
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 3, maxLength: 14 }), (plan) => {
        // Two sides' changes keep an unchanged line between them (an insertion goes after its line).
        const spaced = plan.map((o, i) => (o && plan[i - 1] && plan[i - 1]!.side !== o.side ? null : o));
        const base = plan.map((_, i) => `line ${i}\n`);
        const side = (who: 'current' | 'suggested') =>
          base
            .map((l, i) => {
              const o = spaced[i];
              if (!o || (o.side !== who && o.side !== 'both')) return l;
              const mark = o.side === 'both' ? 'both' : who;
              return o.what === 'edit' ? `${mark} ${i}\n` : o.what === 'delete' ? '' : `${l}${mark} new ${i}\n`;
            })
            .join('');
        const git = gitMerge(base.join(''), side('current'), side('suggested'));
        expect(git.clean).toBe(true);
        expect(merge(base.join(''), side('current'), side('suggested'))).toEqual({ ok: true, text: git.text });
      }),
      { numRuns: 60 },
    );
  });
});
type Side = 'current' | 'suggested' | 'both';
type What = 'edit' | 'delete' | 'insert';

describe('merge: where it differs from git merge-file (the seed\'s rules)', () => {
  const base = lines('# P', '## Steps', '1. One.', '2. Two.', '3. Three.', '4. Four.');
  const cases: Array<{ name: string; current: string; suggested: string; git: 'clean' | 'conflict'; expected: string | 'conflict' }> = [
    {
      name: 'neighbouring lines edited on each side merge',
      current: edit(base, '2. Two.', '2. Two, reworded by hand.'),
      suggested: edit(base, '3. Three.', '3. Three, reworded by the suggestion.'),
      git: 'conflict',
      expected: lines('# P', '## Steps', '1. One.', '2. Two, reworded by hand.', '3. Three, reworded by the suggestion.', '4. Four.'),
    },
    {
      name: 'a line inserted right after a line edited on the other side merges',
      current: edit(base, '2. Two.', '2. Two, reworded.'),
      suggested: edit(base, '2. Two.\n', '2. Two.\n2b. Extra.\n'),
      git: 'conflict',
      expected: lines('# P', '## Steps', '1. One.', '2. Two, reworded.', '2b. Extra.', '3. Three.', '4. Four.'),
    },
    {
      name: 'a line inserted right before a line edited on the other side merges, the insertion first',
      current: edit(base, '3. Three.', '3. Three, reworded.'),
      suggested: edit(base, '3. Three.\n', '2b. Extra.\n3. Three.\n'),
      git: 'conflict',
      expected: lines('# P', '## Steps', '1. One.', '2. Two.', '2b. Extra.', '3. Three, reworded.', '4. Four.'),
    },
    {
      name: 'a deleted line next to an edited one merges',
      current: edit(base, '2. Two.\n', ''),
      suggested: edit(base, '3. Three.', '3. Three, reworded.'),
      git: 'conflict',
      expected: lines('# P', '## Steps', '1. One.', '3. Three, reworded.', '4. Four.'),
    },
    {
      name: 'two insertions at the same place conflict',
      current: edit(base, '2. Two.\n', '2. Two.\n2b. By hand.\n'),
      suggested: edit(base, '2. Two.\n', '2. Two.\n2b. By the suggestion.\n'),
      git: 'conflict',
      expected: 'conflict',
    },
    {
      name: 'a line deleted on one side and edited on the other conflicts',
      current: edit(base, '2. Two.\n', ''),
      suggested: edit(base, '2. Two.', '2. Two, reworded.'),
      git: 'conflict',
      expected: 'conflict',
    },
    {
      name: 'the same line changed two ways conflicts',
      current: edit(base, '2. Two.', '2. Two, one way.'),
      suggested: edit(base, '2. Two.', '2. Two, another way.'),
      git: 'conflict',
      expected: 'conflict',
    },
    {
      name: 'the same insertion made on both sides is made once',
      current: edit(base, '4. Four.\n', '4. Four.\n5. Five.\n'),
      suggested: edit(base, '4. Four.\n', '4. Four.\n5. Five.\n'),
      git: 'clean',
      expected: lines('# P', '## Steps', '1. One.', '2. Two.', '3. Three.', '4. Four.', '5. Five.'),
    },
  ];
  it.each(cases)('$name', ({ current, suggested, git, expected }) => {
    // The git column documents the difference: each case is run through git as well.
    expect(gitMerge(base, current, suggested).clean).toBe(git === 'clean');
    const r = merge(base, current, suggested);
    if (expected === 'conflict') expect(r.ok).toBe(false);
    else expect(r).toEqual({ ok: true, text: expected });
  });

  it('reports each conflict with its line in the file now and the three versions of the part', () => {
    // The file gained two lines at the top since the suggestion was written, so line numbers moved.
    const current = edit(edit(base, '# P\n', '# P\nGoal: g.\nApplies when: a.\n'), '3. Three.', '3. Three, by hand.');
    const suggested = edit(edit(base, '3. Three.', '3. Three, suggested.'), '4. Four.\n', '4. Four.\n5. Five.\n');
    expect(merge(base, current, suggested)).toEqual({
      ok: false,
      conflicts: [{ line: 7, base: ['3. Three.'], current: ['3. Three, by hand.'], suggested: ['3. Three, suggested.'] }],
    });
  });

  it('reports a deletion against an edit as a part with no lines now, at the line it came before', () => {
    const r = merge(base, edit(base, '2. Two.\n', ''), edit(base, '2. Two.', '2. Deux.'));
    expect(r).toEqual({ ok: false, conflicts: [{ line: 4, base: ['2. Two.'], current: [], suggested: ['2. Deux.'] }] });
  });

  it('lists every conflicting part, in file order', () => {
    const current = edit(edit(base, '1. One.', '1. Un.'), '4. Four.', '4. Quatre.');
    const suggested = edit(edit(base, '1. One.', '1. Eins.'), '4. Four.', '4. Vier.');
    const r = merge(base, current, suggested);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.conflicts.map((c) => [c.line, c.current, c.suggested])).toEqual([[3, ['1. Un.'], ['1. Eins.']], [6, ['4. Quatre.'], ['4. Vier.']]]);
  });

  it('an edit on one side spanning two edits of the other is one conflicting part', () => {
    const current = edit(base, '2. Two.\n3. Three.\n', '2. Two and three.\n');
    const suggested = edit(edit(base, '2. Two.', '2. Deux.'), '3. Three.', '3. Trois.');
    expect(merge(base, current, suggested)).toEqual({
      ok: false,
      conflicts: [{ line: 4, base: ['2. Two.', '3. Three.'], current: ['2. Two and three.'], suggested: ['2. Deux.', '3. Trois.'] }],
    });
  });
});

describe('merge: the newline at the end of the file', () => {
  it('adding it on one side merges with an edit of the last line on the other', () => {
    expect(merge('a\nb', 'a\nb\n', 'a\nB')).toEqual({ ok: true, text: 'a\nB\n' });
    expect(merge('a\nb\n', 'a\nb', 'a\nB\n')).toEqual({ ok: true, text: 'a\nB' });
  });
  it('lines appended to a file without one keep the side\'s choice', () => {
    expect(merge('a', 'a\nb', 'a\n')).toEqual({ ok: true, text: 'a\nb\n' });
  });
  it('an empty base or file works', () => {
    expect(merge('', '', 'a\n')).toEqual({ ok: true, text: 'a\n' });
    expect(merge('a\n', '', 'a\n')).toEqual({ ok: true, text: '' });
    expect(merge('', 'x\n', 'y\n')).toEqual({ ok: false, conflicts: [{ line: 1, base: [], current: ['x'], suggested: ['y'] }] });
  });
});

describe('merge: properties', () => {
  // Short lines from a small alphabet, so that generated files share and repeat lines.
  const file = fc
    .tuple(fc.array(fc.constantFrom('a', 'b', 'c', '', '1. Step.', '- Never.'), { maxLength: 12 }), fc.boolean())
    .map(([ls, nl]) => (ls.length === 0 ? '' : ls.join('\n') + (nl ? '\n' : '')));

  it('nothing changed since: the suggestion as written', () => {
    fc.assert(fc.property(file, file, (b, s) => expect(merge(b, b, s)).toEqual({ ok: true, text: s })), { numRuns: 500 });
  });
  it('the suggestion changes nothing: the file as it is', () => {
    fc.assert(fc.property(file, file, (b, c) => expect(merge(b, c, b)).toEqual({ ok: true, text: c })), { numRuns: 500 });
  });
  it('both made the same file: that file', () => {
    fc.assert(fc.property(file, file, (b, x) => expect(merge(b, x, x)).toEqual({ ok: true, text: x })), { numRuns: 500 });
  });
  it('the two sides are symmetric: swapping them gives the same file, or the same conflicts', () => {
    fc.assert(
      fc.property(file, file, file, (b, c, s) => {
        const r = merge(b, c, s);
        const swapped = merge(b, s, c);
        if (r.ok) expect(swapped).toEqual(r);
        else expect(swapped.ok ? [] : swapped.conflicts.map((x) => [x.base, x.suggested, x.current])).toEqual(r.conflicts.map((x) => [x.base, x.current, x.suggested]));
      }),
      { numRuns: 500 },
    );
  });
});
