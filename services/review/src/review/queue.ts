import type { Db } from '@neatroots/ports';
import { DEFAULT_QUEUE_STATES, excerpt, REVIEW_STATES, reviewState, ruleLabel, type ReviewState, type ReviewStateView } from '@neatroots/review-domain';
import { ReviewReadRepo, SopError, type ExampleFinding, type ExampleRow, type PatternRecord, type QueueFacts, type QueueItem, type ReviewQueueQuery, type ReviewQueueView } from '@neatroots/store';
import { fixFactsOf, type FixInfo } from '../suggestions/fix';
import { fixFields, stateOf, verdictView } from './facts';
import { clusteringView } from './theme-view';
import type { ReviewWrites, VerdictContext } from './writes';

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
 *
 * The counts cover every active leaf (3,000 in a busy workspace), so their facts come from one
 * query of a small row each (ReviewReadRepo.queueFacts), not from every pattern's record,
 * verdict history and fix facts: the state of most follows from those facts alone. Only the
 * patterns whose state depends on more (a suppressing verdict older than its rule's rewording:
 * the findings per wording; real or sop_wrong with a suggestion applied: the fix facts) and the
 * page's own are read in full, as before.
 */
export async function reviewQueue(db: Db, writes: ReviewWrites, workspace: string, q: ReviewQueueQuery): Promise<ReviewQueueView> {
  const states = q.state?.length ? q.state : DEFAULT_QUEUE_STATES;
  for (const s of states) if (!(REVIEW_STATES as readonly string[]).includes(s)) throw new SopError(400, 'invalid_query', `state must be one of ${REVIEW_STATES.join(', ')}`);
  const limit = q.limit ?? DEFAULT_QUEUE_LIMIT;
  if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_QUEUE_LIMIT)) throw new SopError(400, 'invalid_query', `limit must be an integer from 1 to ${MAX_QUEUE_LIMIT}`);
  const read = new ReviewReadRepo(db);

  const facts = await read.queueFacts(workspace);
  const quick = new Map<string, ReviewState>();
  const detailed: string[] = [];
  for (const f of facts) {
    const state = quickState(f);
    if (state) quick.set(f.id, state);
    else detailed.push(f.id);
  }
  // The patterns whose state needs their findings per wording or their fix facts, read in full.
  const full = await fullStates(db, writes, read, detailed);
  const stateOfId = (id: string): ReviewState => quick.get(id) ?? full.get(id)!.state.review_state;

  const byState = Object.fromEntries(REVIEW_STATES.map((s) => [s, 0])) as Record<ReviewState, number>;
  const rows = facts.map((f) => {
    const state = stateOfId(f.id);
    byState[state]++;
    return { f, state, sessions: f.findings + f.suppressed };
  });
  const wanted = rows.filter((r) => (states as readonly string[]).includes(r.state)).sort((a, b) => b.sessions - a.sessions || (a.f.id < b.f.id ? -1 : 1));
  const pageRows = wanted.slice(0, limit);
  // The page's patterns in full: their records, verdicts and fix facts (those read above kept).
  const more = await fullStates(db, writes, read, pageRows.map((r) => r.f.id).filter((id) => !full.has(id)));
  const fresh = await read.newSinceVerdict(workspace, pageRows.map((r) => r.f.id));
  const page = pageRows.map((r) => {
    const d = (full.get(r.f.id) ?? more.get(r.f.id))!;
    // without a verdict every finding is new
    const n = { findings: r.f.findings, suppressed: r.f.suppressed, new_findings: fresh.get(r.f.id) ?? r.f.findings };
    return { p: d.p, c: d.c, state: d.state, fix: d.fix, n, sessions: r.sessions };
  });
  const examples = new Map<string, ExampleFinding[]>();
  for (const e of await read.examples(page.map((r) => r.p), EXAMPLES)) (examples.get(e.pattern_id) ?? examples.set(e.pattern_id, []).get(e.pattern_id)!).push(exampleOf(e));

  const clustering = await clusteringView(db, workspace);
  const items: QueueItem[] = page.map(({ p, c, state, fix, n, sessions }) => ({
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
    ...fixFields(fix),
    new_findings: n.new_findings,
    suppressed_count: n.suppressed,
    suggestion: null,
  }));
  return { items, total: wanted.length, counts: byState, clustered_at: clustering.clustered_at };
}

/**
 * A pattern's review state from its queue facts alone, or null when it depends on more: its
 * findings per wording (a suppressing verdict older than the rule's rewording) or its fix facts
 * (real or sop_wrong with a suggestion applied). The domain's reviewState, given what it reads.
 */
export function quickState(f: QueueFacts): ReviewState | null {
  const verdict = f.verdict && f.verdict_at ? { verdict: f.verdict, created_at: f.verdict_at, carried_over: f.carried_over, inherited: f.inherited } : null;
  const facts = { verdict, materially_reclustered_at: f.materially_reclustered_at, reworded_at: f.reworded_at };
  const first = reviewState({ ...facts, findings_on_newer_wordings: 0, fix: null });
  if (first.review_state === 'needs_review') return first.review_state;
  // closed, unless findings on a newer wording than the verdict make it reworded
  if (first.review_state === 'closed') return f.reworded_at && verdict && verdict.created_at < f.reworded_at ? null : 'closed';
  // open, unless a suggestion applied for the verdict makes it fixing, fixed or regressed
  return f.applied ? null : first.review_state;
}

/** These patterns read in full: record, verdict context, findings per wording, fix facts and state. */
async function fullStates(db: Db, writes: ReviewWrites, read: ReviewReadRepo, ids: readonly string[]): Promise<Map<string, { p: PatternRecord; c: VerdictContext; fix: FixInfo | null; state: ReviewStateView }>> {
  const out = new Map<string, { p: PatternRecord; c: VerdictContext; fix: FixInfo | null; state: ReviewStateView }>();
  if (!ids.length) return out;
  const patterns = await writes.repo.patternsByIds(db, ids);
  const ctx = await writes.contexts(db, patterns);
  // Only a reworded rule has findings on a wording newer than a verdict (the reworded state).
  const wordings = await read.wordingCounts(patterns.filter((p) => ctx.get(p.id)!.wording.since !== null));
  const fixes = await fixFactsOf(db, ctx.values());
  for (const p of patterns) {
    const c = ctx.get(p.id)!;
    const fix = fixes.get(p.id) ?? null;
    out.set(p.id, { p, c, fix, state: stateOf(c, wordings.get(p.id) ?? [], fix) });
  }
  return out;
}
