import type { Db } from '@neatroots/ports';
import { DEFAULT_QUEUE_STATES, excerpt, REVIEW_STATES, ruleLabel, type ReviewState } from '@neatroots/review-domain';
import { ReviewReadRepo, SopError, type ExampleFinding, type ExampleRow, type PatternRecord, type QueueItem, type ReviewQueueQuery, type ReviewQueueView } from '@neatroots/store';
import { fixFactsOf } from '../suggestions/fix';
import { fixFields, stateOf, verdictView } from './facts';
import { clusteringView } from './theme-view';
import type { ReviewWrites } from './writes';

export const DEFAULT_QUEUE_LIMIT = 50;
export const MAX_QUEUE_LIMIT = 500;
const EXAMPLES = 5;

/** The leaves reviewers judge: a rule pattern that isn't split, else its failure modes and other; retired ones left out. */
export function activeLeaves(patterns: readonly PatternRecord[]): PatternRecord[] {
  const active = patterns.filter((p) => p.retired_at === null);
  const split = new Set(active.filter((p) => p.parent_id !== null).map((p) => p.parent_id));
  return active.filter((p) => !(p.kind === 'rule' && split.has(p.id)));
}

export function exampleOf(r: ExampleRow): ExampleFinding {
  return {
    finding_id: r.finding_id,
    session_id: r.session_id,
    external_id: r.external_id,
    started_at: r.started_at,
    status: r.status,
    excerpt: excerpt(r.evidence as { quote?: string | null }[], r.reason),
    evidence: r.evidence,
    suppressed: r.suppressed,
  };
}

/**
 * GET /review: active leaf patterns in the review states asked for (default needs_review and
 * regressed), most sessions first, with counts per state. Review states are computed here from
 * each pattern's facts (the domain's reviewState), never stored, so a new verdict, a recluster
 * or a new wording shows at once.
 */
export async function reviewQueue(db: Db, writes: ReviewWrites, workspace: string, q: ReviewQueueQuery): Promise<ReviewQueueView> {
  const states = q.state?.length ? q.state : DEFAULT_QUEUE_STATES;
  for (const s of states) if (!(REVIEW_STATES as readonly string[]).includes(s)) throw new SopError(400, 'invalid_query', `state must be one of ${REVIEW_STATES.join(', ')}`);
  const limit = q.limit ?? DEFAULT_QUEUE_LIMIT;
  if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_QUEUE_LIMIT)) throw new SopError(400, 'invalid_query', `limit must be an integer from 1 to ${MAX_QUEUE_LIMIT}`);
  const read = new ReviewReadRepo(db);

  const leaves = activeLeaves(await writes.repo.patternsOf(db, workspace));
  const counts = new Map<string, { findings: number; suppressed: number; new_findings: number }>();
  for (const [id, c] of await read.leafCounts(workspace)) {
    // without a verdict every finding is new
    counts.set(id, { findings: c.findings, suppressed: c.suppressed, new_findings: c.new_since_verdict ?? c.findings });
  }
  const withFindings = leaves.filter((p) => (counts.get(p.id)?.findings ?? 0) + (counts.get(p.id)?.suppressed ?? 0) > 0);
  const ctx = await writes.contexts(db, withFindings);
  // Only a reworded rule has findings on a wording newer than a verdict (the reworded state).
  const wordings = await read.wordingCounts(withFindings.filter((p) => ctx.get(p.id)!.wording.since !== null));

  const fixes = await fixFactsOf(db, ctx.values());

  const byState = Object.fromEntries(REVIEW_STATES.map((s) => [s, 0])) as Record<ReviewState, number>;
  const rows = withFindings.map((p) => {
    const c = ctx.get(p.id)!;
    const state = stateOf(c, wordings.get(p.id) ?? [], fixes.get(p.id) ?? null);
    byState[state.review_state]++;
    const n = counts.get(p.id)!;
    return { p, c, state, n, sessions: n.findings + n.suppressed };
  });
  const wanted = rows.filter((r) => (states as readonly string[]).includes(r.state.review_state)).sort((a, b) => b.sessions - a.sessions || (a.p.id < b.p.id ? -1 : 1));
  const page = wanted.slice(0, limit);
  const examples = new Map<string, ExampleFinding[]>();
  for (const e of await read.examples(page.map((r) => r.p), EXAMPLES)) (examples.get(e.pattern_id) ?? examples.set(e.pattern_id, []).get(e.pattern_id)!).push(exampleOf(e));

  const clustering = await clusteringView(db, workspace);
  const items: QueueItem[] = page.map(({ p, c, state, n, sessions }) => ({
    pattern_id: p.id,
    kind: p.kind,
    name: p.name,
    label: ruleLabel(p.rule_kind, p.rule_index),
    theme: clustering.themeOf(p),
    procedure_id: p.procedure_id,
    procedure_name: p.procedure_name,
    rule_id: p.lineage_id,
    rule_text: p.rule_text,
    sessions,
    examples: examples.get(p.id) ?? [],
    verdict: verdictView(c.verdict),
    ...state,
    ...fixFields(fixes.get(p.id)),
    new_findings: n.new_findings,
    suppressed_count: n.suppressed,
    suggestion: null,
  }));
  return { items, total: wanted.length, counts: byState, clustered_at: clustering.clustered_at };
}
