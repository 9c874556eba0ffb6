import { freshness, hasEdit } from './freshness';

const BASE = 'a\nb\nc\nd\n';
const SUGGESTED = 'a\nB\nc\nd\n';
const s = { path: 'procedures/x.md', old_text: BASE, new_text: SUGGESTED };
const compiles = () => [];

describe('freshness', () => {
  it('current when the file is the one it was written against', () => {
    expect(freshness(s, BASE, compiles)).toEqual({ state: 'current', changes: '', merged_text: null, conflicts: [], issues: [], reason: null });
  });

  it('merges when the file changed on other lines and the merged file compiles', () => {
    const f = freshness(s, 'a\nb\nc\nD\n', compiles);
    expect(f).toMatchObject({ state: 'merges', merged_text: 'a\nB\nc\nD\n', conflicts: [], reason: null });
    expect(f.changes).toContain('-d\n+D');
  });

  it('conflict when the same line changed, when the merged file does not compile, or the file left head', () => {
    expect(freshness(s, 'a\nX\nc\nd\n', compiles)).toMatchObject({ state: 'conflict', conflicts: [{ line: 2, base: ['b'], current: ['X'], suggested: ['B'] }], reason: expect.stringContaining('line 2') });
    const issue = { file: 'procedures/x.md', line: 4, message: 'duplicate never rule' };
    expect(freshness(s, 'a\nb\nc\nD\n', () => [issue])).toMatchObject({ state: 'conflict', issues: [issue], merged_text: null, reason: expect.stringContaining('would not compile (procedures/x.md:4: duplicate never rule)') });
    expect(freshness(s, null, compiles)).toMatchObject({ state: 'conflict', reason: 'procedures/x.md is no longer at head' });
    // The file unchanged, but the suggested one no longer compiles with head.
    expect(freshness(s, BASE, () => [issue])).toMatchObject({ state: 'conflict', changes: '', issues: [issue], reason: expect.stringContaining('with head as it is now, the suggested procedures/x.md would not compile') });
  });
});

describe('hasEdit: whether a release file has the suggestion\'s edit', () => {
  it('alone, or merged with other edits; not the base, not a different edit', () => {
    expect(hasEdit(BASE, SUGGESTED, SUGGESTED)).toBe(true);
    expect(hasEdit(BASE, SUGGESTED, 'a\nB\nc\nD\n')).toBe(true);
    expect(hasEdit(BASE, SUGGESTED, BASE)).toBe(false);
    expect(hasEdit(BASE, SUGGESTED, 'a\nX\nc\nd\n')).toBe(false);
    expect(hasEdit(BASE, BASE, BASE)).toBe(false);
  });
});
