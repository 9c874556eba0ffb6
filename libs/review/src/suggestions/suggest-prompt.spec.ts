import { applyEdits, MalformedSuggestion, readSuggestion, retryAsk, suggestAsk, suggestSubject } from './suggest-prompt';

const FILE = '# Refunds\nGoal: The caller is refunded.\n\n## Steps\n1. Look up the order.\n2. Refund it.   \n\n## Never\n- Refund twice.\n';

describe('SuggestEdit answers', () => {
  it('reads edits leniently: a whole new_text is taken too; no edits, or an edit without find, is malformed', () => {
    expect(readSuggestion({ id: 'q1', rationale: ' Why. ', edits: [{ find: 'a', replace: 'b' }] })).toEqual({ rationale: 'Why.', edits: [{ find: 'a', replace: 'b' }], new_text: null });
    expect(readSuggestion({ rationale: 'r', new_text: '# X\n' })).toEqual({ rationale: 'r', edits: null, new_text: '# X\n' });
    expect(() => readSuggestion('just text')).toThrow(MalformedSuggestion);
    expect(() => readSuggestion({ rationale: 'r', edits: [] })).toThrow(/no "edits"/);
    expect(() => readSuggestion({ edits: [{ find: ' ', replace: 'x' }] })).toThrow(/edit 1 has no "find"/);
    expect(() => readSuggestion({ edits: [{ find: 'x' }] })).toThrow(/edit 1 has no "replace"/);
  });

  it('applies edits as whole lines, trailing spaces ignored, keeping the final newline; adds and deletes lines', () => {
    const r = applyEdits(FILE, [
      { find: '2. Refund it.', replace: '2. Refund it to the card used.\n3. Email the receipt.' },
      { find: '- Refund twice.\n', replace: '' },
    ]);
    expect(r).toEqual({ ok: true, text: '# Refunds\nGoal: The caller is refunded.\n\n## Steps\n1. Look up the order.\n2. Refund it to the card used.\n3. Email the receipt.\n\n## Never\n' });
  });

  it('an edit whose lines are not in the file, or are there twice, is a problem naming the edit', () => {
    const r = applyEdits(FILE, [{ find: 'Look up', replace: 'x' }, { find: '', replace: 'x' }]);
    expect(r).toEqual({ ok: false, problems: [expect.stringMatching(/^edit 1: .* are not in the file$/), expect.stringMatching(/^edit 2: .* are in the file 2 times$/)] });
  });

  it('the subject carries the file, the rule, the verdict and note, the findings (at most 5) and, for a rewrite, the changes since', () => {
    const findings = Array.from({ length: 7 }, (_, i) => ({ session: `s${i}`, status: 'violated', excerpt: `said ${i}`, reason: null }));
    const subject = suggestSubject({ path: 'procedures/refunds.md', procedure_name: 'Refunds', file: FILE, rule_label: 'Never rule 1', rule_text: 'Refund twice.', pattern_name: 'Refunded twice', sessions: 7, verdict: 'sop_wrong', note: 'Partial refunds happen.', findings, changes_since: '--- a\n+++ b\n' });
    expect(subject).toContain(`<<<FILE\n${FILE.trimEnd()}\nFILE>>>`);
    expect(subject).toContain('The rule: Never rule 1: "Refund twice."');
    expect(subject).toContain('The verdict: sop_wrong, with the reviewer\'s note: "Partial refunds happen."');
    expect(subject).toContain('- session s4: violated; "said 4"');
    expect(subject).not.toContain('s5');
    expect(subject).toContain('keep these edits and build on them:\n<<<DIFF\n--- a\n+++ b\nDIFF>>>');
    expect(retryAsk('real', 'sug_1', ['sopc: x.md:3: bad'])).toBe(`${suggestAsk('real', 'sug_1')} Your previous edit could not be used: sopc: x.md:3: bad. Answer again with edits that fix this.`);
  });
});
