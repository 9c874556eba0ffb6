import { effectiveVerdict, latestVerdict, type VerdictKind } from './verdicts';
import { isSuppressed, verdictCovers } from './suppression';
import { passingStatus, regressionExpect } from './regression';

type Override = { correct: boolean } | null;
const RIGHT = { correct: true };
const WRONG = { correct: false };

// The seed's table, one row per (verdict, override): suppressed?
const TABLE: [VerdictKind | null, Override, boolean][] = [
  [null, null, false],
  [null, RIGHT, false],
  [null, WRONG, true], // a wrong one is suppressed
  ['real', null, false],
  ['real', RIGHT, false],
  ['real', WRONG, true],
  ['sop_wrong', null, false],
  ['sop_wrong', RIGHT, false],
  ['sop_wrong', WRONG, true],
  ['acceptable', null, true], // suppressed now and later
  ['acceptable', RIGHT, true], // acceptable suppresses either way
  ['acceptable', WRONG, true],
  ['checker_wrong', null, true],
  ['checker_wrong', RIGHT, false], // a right one overrides a checker_wrong pattern for that finding
  ['checker_wrong', WRONG, true],
];

describe('suppression', () => {
  it.each(TABLE)('verdict %s, override %j: suppressed %s', (verdict, override, suppressed) => {
    expect(isSuppressed({ verdict, verdictCovers: true, override })).toBe(suppressed);
  });

  it('a verdict does not cover findings on a wording newer than it; an override still applies', () => {
    const wording = { rule_id: 'r2', since: '2026-11-10T00:00:00.000Z' };
    expect(verdictCovers('2026-11-01T00:00:00.000Z', { rule_id: 'r2' }, wording)).toBe(false);
    expect(verdictCovers('2026-11-01T00:00:00.000Z', { rule_id: 'r1' }, wording)).toBe(true);
    expect(verdictCovers('2026-11-20T00:00:00.000Z', { rule_id: 'r2' }, wording)).toBe(true);
    expect(verdictCovers('2026-11-01T00:00:00.000Z', { rule_id: 'r1' }, { rule_id: 'r1', since: null })).toBe(true);
    expect(verdictCovers(null, { rule_id: 'r1' }, { rule_id: 'r1', since: null })).toBe(false);
    expect(isSuppressed({ verdict: 'acceptable', verdictCovers: false, override: null })).toBe(false);
    expect(isSuppressed({ verdict: 'acceptable', verdictCovers: false, override: WRONG })).toBe(true);
  });

  describe('wordings A -> B -> C (C current), a verdict given while A was current', () => {
    const A_AT = null; // the first wording: no previous rule
    const B_AT = '2026-11-10T00:00:00.000Z';
    const C_AT = '2026-11-20T00:00:00.000Z';
    const current = { rule_id: 'C', since: C_AT };
    const onA = { rule_id: 'A', wording_since: A_AT };
    const onB = { rule_id: 'B', wording_since: B_AT };
    const onC = { rule_id: 'C' };
    const ON_A = '2026-11-01T00:00:00.000Z';
    const ON_B = '2026-11-15T00:00:00.000Z';

    it("covers A's findings (the wording it judged) and neither B's nor C's, which came after it", () => {
      expect(verdictCovers(ON_A, onA, current)).toBe(true);
      expect(verdictCovers(ON_A, onB, current)).toBe(false);
      expect(verdictCovers(ON_A, onC, current)).toBe(false);
    });

    it("so an acceptable verdict on A suppresses A's findings and not B's; a checker_wrong one too", () => {
      for (const verdict of ['acceptable', 'checker_wrong'] as const) {
        expect(isSuppressed({ verdict, verdictCovers: verdictCovers(ON_A, onA, current), override: null })).toBe(true);
        expect(isSuppressed({ verdict, verdictCovers: verdictCovers(ON_A, onB, current), override: null })).toBe(false);
      }
    });

    it('a verdict given while B was current covers A and B, not C; one given on C (or the day C came in) covers all', () => {
      expect([onA, onB, onC].map((f) => verdictCovers(ON_B, f, current))).toEqual([true, true, false]);
      expect([onA, onB, onC].map((f) => verdictCovers(B_AT, f, current))).toEqual([true, true, false]);
      expect([onA, onB, onC].map((f) => verdictCovers(C_AT, f, current))).toEqual([true, true, true]);
    });

    it("an earlier wording whose date is unknown (null), or not given, is covered", () => {
      expect(verdictCovers(ON_A, { rule_id: 'B', wording_since: null }, current)).toBe(true);
      expect(verdictCovers(ON_A, { rule_id: 'B' }, current)).toBe(true);
    });
  });
});

describe('verdicts', () => {
  const v = (verdict: VerdictKind, at: string) => ({ verdict, note: null, reviewer: null, created_at: at });

  it('are appended: the latest is the verdict, the rest the history, newest first', () => {
    const { verdict, history } = latestVerdict([v('real', '2026-11-01T00:00:00Z'), v('acceptable', '2026-11-03T00:00:00Z'), v('sop_wrong', '2026-11-02T00:00:00Z')]);
    expect(verdict?.verdict).toBe('acceptable');
    expect(history.map((h) => h.verdict)).toEqual(['sop_wrong', 'real']);
    expect(latestVerdict([])).toEqual({ verdict: null, history: [] });
  });

  it("a failure mode without its own verdict has its rule pattern's, inherited", () => {
    const parent = v('checker_wrong', '2026-11-01T00:00:00Z');
    expect(effectiveVerdict(null, parent)).toMatchObject({ verdict: 'checker_wrong', inherited: true });
    expect(effectiveVerdict(v('real', '2026-11-02T00:00:00Z'), parent)).toMatchObject({ verdict: 'real', inherited: false });
    expect(effectiveVerdict(null, null)).toBeNull();
    // and the inherited verdict suppresses the failure mode's findings like its own would
    expect(isSuppressed({ verdict: effectiveVerdict(null, parent)!.verdict, verdictCovers: true, override: null })).toBe(true);
  });
});

describe('regression expectations', () => {
  it.each([
    ['real', null, 'agent'],
    ['real', WRONG, 'checker'],
    ['acceptable', null, 'checker'],
    ['acceptable', RIGHT, 'checker'],
    ['sop_wrong', null, 'checker'],
    ['checker_wrong', null, 'checker'],
    ['checker_wrong', RIGHT, 'agent'],
  ] as [VerdictKind, Override, string][])('verdict %s, override %j: expect %s', (verdict, override, expect_) => {
    expect(regressionExpect(verdict, override)).toBe(expect_);
  });

  it('expects the passing status of each kind', () => {
    expect([passingStatus('step'), passingStatus('never'), passingStatus('warning')]).toEqual(['done', 'ok', 'present']);
  });
});
