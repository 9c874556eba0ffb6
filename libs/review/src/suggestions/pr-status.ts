/**
 * What a suggestion's pull request on GitHub means for the suggestion: merged makes it merged;
 * closed without merging makes it dismissed, with the note "PR closed"; open changes nothing.
 * Pure, so the 15-minute follow-up and the follow-up on read decide the same way.
 */
export type PullRequestOutcome = { state: 'open' } | { state: 'merged'; mergeCommitSha: string | null } | { state: 'closed' };

export type SuggestionTransition =
  | { to: 'merged'; mergeCommitSha: string | null }
  | { to: 'dismissed'; note: 'PR closed' }
  | null;

export function transitionForPullRequest(pr: PullRequestOutcome): SuggestionTransition {
  switch (pr.state) {
    case 'merged':
      return { to: 'merged', mergeCommitSha: pr.mergeCommitSha };
    case 'closed':
      return { to: 'dismissed', note: 'PR closed' };
    case 'open':
      return null;
  }
}
