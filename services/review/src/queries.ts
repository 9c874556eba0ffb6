import type { Db } from '@neatroots/ports';
import { DeadLettersRepo, FindingsRepo, RunsRepo, type QuietChecks, type ReviewQueries } from '@neatroots/store';

/**
 * The review service's read side and the person's verdicts, as the api calls them (in-process
 * embedded, over gRPC distributed). Reads are plain queries; a dismissal or a reopen changes
 * a finding and its check's counts in one transaction, then forgets the project's cached
 * quiet set so this process sees a check go quiet (or count again) at once.
 */
export function createReviewQueries(db: Db, opts: { quiet?: QuietChecks } = {}): ReviewQueries {
  const runs = new RunsRepo(db);
  const findings = new FindingsRepo(db);
  const deadLetters = new DeadLettersRepo(db);
  return {
    listRuns: (project, q) => runs.list(project, q),
    getRun: (project, runId, q) => runs.detail(project, runId, q),
    listSpans: (project, runId, q) => runs.spans(project, runId, q),
    getSpan: (project, runId, spanId) => runs.span(project, runId, spanId),
    listFindings: (project, q) => findings.list(project, q),
    checkStats: (project) => findings.checkStats(project),
    listDeadLetters: (project, q) => deadLetters.list(project, q),
    async dismiss(project, findingId, input) {
      const out = await db.transaction((tx) => new FindingsRepo(tx).dismiss(project, findingId, input));
      opts.quiet?.invalidate(project);
      return out;
    },
    async reopen(project, findingId) {
      const out = await db.transaction((tx) => new FindingsRepo(tx).reopen(project, findingId));
      opts.quiet?.invalidate(project);
      return out;
    },
  };
}
