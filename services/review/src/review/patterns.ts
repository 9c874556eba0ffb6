import type { Db } from '@neatroots/ports';
import { passingStatus, regressionExpect } from '@neatroots/review-domain';
import {
  cursorJson,
  ReviewReadRepo,
  SopError,
  type FindingCounts,
  type PatternRecord,
  type PatternsListView,
  type PatternsQuery,
  type PatternSummary,
  type PatternView,
  type RegressionLine,
  type WindowQuery,
  type WordingCount,
} from '@neatroots/store';
import { fixFactsOf, type FixInfo } from '../suggestions/fix';
import { fixFields, ruleView, stateOf, verdictView } from './facts';
import { clusteringView, type ThemeOf } from './theme-view';
import { resolveWindow } from './window';
import { findingKey, type ReviewWrites, type VerdictContext } from './writes';

const SESSIONS_SHOWN = 100;
const PHRASINGS = 10;

interface Counted {
  findings: number;
  suppressed: number;
  first_seen: string | null;
  last_seen: string | null;
}

/** Window counts per pattern: a rule pattern counts every finding of its rule, a failure mode its own. */
function countsByPattern(rows: readonly FindingCounts[]): Map<string, Counted> {
  const out = new Map<string, Counted>();
  const add = (id: string, r: FindingCounts) => {
    const c = out.get(id) ?? { findings: 0, suppressed: 0, first_seen: null, last_seen: null };
    c.findings += r.findings;
    c.suppressed += r.suppressed;
    if (r.first_seen && (!c.first_seen || r.first_seen < c.first_seen)) c.first_seen = r.first_seen;
    if (r.last_seen && (!c.last_seen || r.last_seen > c.last_seen)) c.last_seen = r.last_seen;
    out.set(id, c);
  };
  for (const r of rows) {
    add(r.rule_pattern_id, r);
    if (r.pattern_id !== r.rule_pattern_id) add(r.pattern_id, r);
  }
  return out;
}

function summary(p: PatternRecord, ctx: VerdictContext, counted: Counted | undefined, wordings: readonly WordingCount[], themeOf: ThemeOf, fix: FixInfo | null = null): PatternSummary {
  const c = counted ?? { findings: 0, suppressed: 0, first_seen: null, last_seen: null };
  return {
    id: p.id,
    kind: p.kind,
    parent_id: p.parent_id,
    name: p.name,
    named_by: p.named_by,
    description: p.kind === 'rule' ? p.rule_text : p.description,
    procedure_id: p.procedure_id,
    procedure_name: p.procedure_name,
    rule: ruleView(p),
    theme: themeOf(p),
    findings: c.findings,
    // one finding per session and rule: a pattern's sessions are its findings, suppressed or not
    sessions: c.findings + c.suppressed,
    suppressed: c.suppressed,
    first_seen: c.first_seen,
    last_seen: c.last_seen,
    clustered_at: p.clustered_at,
    retired_at: p.retired_at,
    verdict: verdictView(ctx.verdict),
    ...stateOf(ctx, wordings, fix),
    ...fixFields(fix),
  };
}

/** Per pattern of a reworded rule, its own findings per wording (the reworded review state). */
async function wordingCounts(read: ReviewReadRepo, ctx: Map<string, VerdictContext>): Promise<Map<string, WordingCount[]>> {
  const reworded = [...ctx.values()].filter((c) => c.wording.since !== null);
  return read.wordingCounts(reworded.map((c) => c.pattern));
}

export const DEFAULT_PATTERNS_LIMIT = 100;
export const MAX_PATTERNS_LIMIT = 500;

/** Where a page of GET /patterns starts: after this rule pattern in the list's order. */
interface PatternsCursor {
  findings: number;
  suppressed: number;
  id: string;
}

function patternsCursor(c: PatternsCursor): string {
  return Buffer.from(JSON.stringify(['patterns', c.findings, c.suppressed, c.id]), 'utf8').toString('base64url');
}

/** A cursor this list handed out (["patterns", findings, suppressed, id], base64url); 400 invalid_cursor for any other. */
function readPatternsCursor(cursor: string): PatternsCursor {
  const v = cursorJson(cursor);
  const count = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;
  if (!Array.isArray(v) || v.length !== 4 || v[0] !== 'patterns' || !count(v[1]) || !count(v[2]) || typeof v[3] !== 'string' || !v[3]) {
    throw new SopError(400, 'invalid_cursor', 'cursor is not one this list returned (pass back next_cursor as it came, with the same filters)');
  }
  return { findings: v[1], suppressed: v[2], id: v[3] };
}

/** The list's order: most findings first, then most suppressed, then by id. */
function comparePatterns(a: PatternsCursor, b: PatternsCursor): number {
  return b.findings - a.findings || b.suppressed - a.suppressed || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * GET /patterns: rule patterns with findings in the window, with their failure modes, most
 * findings first, a page of `limit` (default 100) after `cursor`. The order comes from the
 * window's counts alone, so only the page's rule patterns and their failure modes are read
 * and given their review state.
 */
export async function listPatterns(db: Db, writes: ReviewWrites, workspace: string, q: PatternsQuery): Promise<PatternsListView> {
  const limit = q.limit ?? DEFAULT_PATTERNS_LIMIT;
  if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_PATTERNS_LIMIT)) throw new SopError(400, 'invalid_query', `limit must be an integer from 1 to ${MAX_PATTERNS_LIMIT}`);
  if (q.cursor !== undefined && typeof q.cursor !== 'string') throw new SopError(400, 'invalid_cursor', 'cursor is not one this list returned');
  const after = q.cursor === undefined ? null : readPatternsCursor(q.cursor);
  const window = resolveWindow(q);
  const read = new ReviewReadRepo(db);
  const rows = await read.findingCounts(workspace, window, { procedure: q.procedure, lineage: q.rule });
  const counted = countsByPattern(rows);
  const order = [...new Set(rows.map((r) => r.rule_pattern_id))]
    .map((id) => ({ id, findings: counted.get(id)!.findings, suppressed: counted.get(id)!.suppressed }))
    .sort(comparePatterns);
  const from = after ? order.findIndex((k) => comparePatterns(k, after) > 0) : 0;
  const keys = from < 0 ? [] : order.slice(from, from + limit);
  const more = from >= 0 && from + limit < order.length;

  const pageIds = keys.map((k) => k.id);
  const byId = new Map((await writes.repo.patternsByIds(db, pageIds)).filter((p) => p.workspace === workspace && p.kind === 'rule').map((p) => [p.id, p]));
  // Each rule pattern's failure modes (and other) with findings in the window, grouped once by parent.
  const childrenOf = new Map<string, PatternRecord[]>();
  for (const c of await writes.repo.childrenOf(db, [...byId.keys()])) {
    if (counted.has(c.id)) (childrenOf.get(c.parent_id!) ?? childrenOf.set(c.parent_id!, []).get(c.parent_id!)!).push(c);
  }
  const rules = pageIds.map((id) => byId.get(id)).filter((p): p is PatternRecord => p !== undefined);
  const ctx = await writes.contexts(db, [...rules, ...[...childrenOf.values()].flat()]);
  const wordings = await wordingCounts(read, ctx);
  const clustering = await clusteringView(db, workspace);
  const fixes = await fixFactsOf(db, ctx.values());
  const sum = (p: PatternRecord) => summary(p, ctx.get(p.id)!, counted.get(p.id), wordings.get(p.id) ?? [], clustering.themeOf, fixes.get(p.id));
  const items = rules.map((p) => ({ ...sum(p), sub_patterns: (childrenOf.get(p.id) ?? []).map(sum) }));
  const last = keys[keys.length - 1];
  return { items, next_cursor: more && last ? patternsCursor(last) : null, clustered_at: clustering.clustered_at, window };
}

/** GET /patterns/{id}: the rule, its failure modes, example phrasings, its sessions in the window, verdicts and review state. */
export async function getPattern(db: Db, writes: ReviewWrites, workspace: string, id: string, q: WindowQuery): Promise<PatternView> {
  const window = resolveWindow(q);
  const read = new ReviewReadRepo(db);
  const p = await writes.repo.pattern(db, workspace, id);
  if (!p) throw new SopError(404, 'not_found', `no pattern ${id} in workspace ${workspace}`);
  const children = p.kind === 'rule' ? await writes.repo.children(db, p.id) : [];
  const ctx = await writes.contexts(db, [p, ...children]);
  const wordings = await wordingCounts(read, ctx);
  const rulePattern = p.parent_id ?? p.id;
  const inWindow = countsByPattern(await read.findingCounts(workspace, window, { rulePattern }));
  const allTime = countsByPattern(await read.findingCounts(workspace, null, { rulePattern }));
  const { themeOf } = await clusteringView(db, workspace);
  const fixes = await fixFactsOf(db, ctx.values());
  const { sessions: sessionCount, ...head } = summary(p, ctx.get(p.id)!, inWindow.get(p.id), wordings.get(p.id) ?? [], themeOf, fixes.get(p.id));
  const sessions = await read.sessionsOf(p, window, SESSIONS_SHOWN);
  return {
    ...head,
    session_count: sessionCount,
    verdict_history: ctx.get(p.id)!.history.map((v) => verdictView({ ...v, inherited: false })!),
    suppressed_count: allTime.get(p.id)?.suppressed ?? 0,
    failure_modes: children.map((c) => summary(c, ctx.get(c.id)!, inWindow.get(c.id), wordings.get(c.id) ?? [], themeOf, fixes.get(c.id))),
    wordings: await read.wordings(p),
    example_phrasings: await read.phrasings(p, PHRASINGS),
    sessions: sessions.map((s) => ({
      session_id: s.session_id,
      external_id: s.external_id,
      started_at: s.started_at,
      finding_id: s.finding_id,
      status: s.status,
      suppressed: s.suppressed,
      override: s.correct === null ? null : { correct: s.correct, note: s.note, reviewer: s.reviewer },
    })),
    suggestions: [],
    window,
  };
}

/** GET /patterns/{id}/regression: one line per finding in the pattern; 409 without a verdict. */
export async function regression(db: Db, writes: ReviewWrites, workspace: string, id: string): Promise<RegressionLine[]> {
  const p = await writes.repo.pattern(db, workspace, id);
  if (!p) throw new SopError(404, 'not_found', `no pattern ${id} in workspace ${workspace}`);
  // The verdict first: without one the answer is 409, and the pattern's findings (thousands) are not read.
  const own = await writes.contexts(db, [p]);
  if (!own.get(p.id)?.verdict) throw new SopError(409, 'no_verdict', `pattern ${id} has no verdict yet: give one (POST .../patterns/${id}/verdict) before asking for its regression set`);
  const rows = await new ReviewReadRepo(db).regressionRows(p);
  // A rule pattern's findings may sit in its failure modes, each going by its own verdict.
  const others = [...new Set(rows.map((r) => r.pattern_id))].filter((x) => x !== p.id);
  const ctx = new Map([...own, ...(await writes.contexts(db, await writes.repo.patternsByIds(db, others)))]);
  const overrides = await writes.overridesOf(db, rows);
  return rows.map((r) => {
    const verdict = (ctx.get(r.pattern_id) ?? ctx.get(p.id))!.verdict ?? ctx.get(p.id)!.verdict!;
    const o = overrides.get(findingKey(r.session_id, r.procedure_id, r.rule_id));
    return {
      session_id: r.session_id,
      external_id: r.external_id,
      transcript_ref: r.transcript_ref,
      procedure_id: r.procedure_id,
      rule_id: r.rule_id,
      rule_kind: r.kind,
      rule_text: r.text,
      verdict: verdict.verdict,
      observed_status: r.status,
      expected_status: passingStatus(r.kind),
      expect: regressionExpect(verdict.verdict, o ? { correct: o.correct } : null),
    };
  });
}
