import { reviewState, type PatternFacts, type ReviewReason, type ReviewState } from './review-state';

const T0 = '2026-11-01T00:00:00.000Z';
const T1 = '2026-11-05T00:00:00.000Z';
const T2 = '2026-11-09T00:00:00.000Z';
const V = (verdict: 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong', at = T1, carried_over = false) => ({ verdict, created_at: at, carried_over });

// One row per state and reason the seed names.
const TABLE: [string, PatternFacts, ReviewState, ReviewReason | null, RegExp][] = [
  ['no verdict', { verdict: null }, 'needs_review', 'no_verdict', /No verdict/],
  ['carried over by a recluster', { verdict: V('real', T1, true) }, 'needs_review', 'carried_over', /carried over/],
  ['older than a material recluster', { verdict: V('real', T0), materially_reclustered_at: T1 }, 'needs_review', 'reclustered', /less than half/],
  ['newer than the recluster', { verdict: V('real', T2), materially_reclustered_at: T1 }, 'open', null, /waiting for a fix/],
  ['acceptable, older than the current wording, findings on it', { verdict: V('acceptable', T0), reworded_at: T1, findings_on_newer_wordings: 2 }, 'needs_review', 'reworded', /2 findings on a newer wording are not suppressed/],
  ['checker_wrong, older than the wording, one finding on it', { verdict: V('checker_wrong', T0), reworded_at: T1, findings_on_newer_wordings: 1 }, 'needs_review', 'reworded', /1 finding on a newer wording is not/],
  ['acceptable given on A, C current, findings only on B in between', { verdict: V('acceptable', T0), reworded_at: T2, findings_on_newer_wordings: 1 }, 'needs_review', 'reworded', /1 finding on a newer wording is not suppressed/],
  ['acceptable, older than the wording, no finding on it yet', { verdict: V('acceptable', T0), reworded_at: T1, findings_on_newer_wordings: 0 }, 'closed', null, /suppressed/],
  ['real, older than the wording (findings keep counting anyway)', { verdict: V('real', T0), reworded_at: T1, findings_on_newer_wordings: 3 }, 'open', null, /real mistake/],
  ['acceptable, confirmed after the rewording', { verdict: V('acceptable', T2), reworded_at: T1, findings_on_newer_wordings: 3 }, 'closed', null, /Acceptable/],
  ['real', { verdict: V('real') }, 'open', null, /A real mistake/],
  ['sop_wrong', { verdict: V('sop_wrong') }, 'open', null, /instruction is wrong/],
  ['acceptable', { verdict: V('acceptable') }, 'closed', null, /Acceptable/],
  ['checker_wrong', { verdict: V('checker_wrong') }, 'closed', null, /checker was wrong/],
  ['inherited checker_wrong', { verdict: { verdict: 'checker_wrong', created_at: T1, inherited: true } }, 'closed', null, /checker was wrong/],
  ['a fix waiting for its release', { verdict: V('real'), fix: { release: null, sessions: 0, sessions_with_finding: 0 } }, 'fixing', null, /waiting for the release/],
  ['a fix with 4 clean sessions', { verdict: V('real'), fix: { release: { number: 7 }, sessions: 4, sessions_with_finding: 0 } }, 'fixing', null, /4 of 10/],
  ['a fix with 10 clean sessions', { verdict: V('sop_wrong'), fix: { release: { number: 7 }, sessions: 10, sessions_with_finding: 0 } }, 'fixed', null, /release 7/],
  ['a finding after the fix', { verdict: V('real'), fix: { release: { number: 7 }, sessions: 12, sessions_with_finding: 1 } }, 'regressed', 'came_back', /^Came back after release 7$/],
];

describe('review state', () => {
  it.each(TABLE)('%s', (_name, facts, state, reason, note) => {
    const got = reviewState(facts);
    expect([got.review_state, got.review_reason]).toEqual([state, reason]);
    expect(got.review_note).toMatch(note);
  });
});
