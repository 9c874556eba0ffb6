import type { Queryable } from '@neatroots/ports';
import { effectiveVerdict, isSuppressed, rollUpCheck, rollUpSession, verdictCovers } from '@neatroots/review-domain';
import type { Lock, ProcedureCheck, ProcedureResult } from '@neatroots/sop';
import { chunks, LineageRepo, PatternsRepo, wordingSince, type FindingRef, type OverrideRecord, type PatternRecord, type VerdictRecord } from '@neatroots/store';

/** A pattern with what its findings' suppression depends on: the verdict it goes by, and its rule's current wording. */
export interface VerdictContext {
  pattern: PatternRecord;
  verdict: (VerdictRecord & { inherited: boolean }) | null;
  history: VerdictRecord[];
  wording: { rule_id: string; since: string | null };
  /** When each wording of the workspace's rules came in (for a finding on an earlier wording than the current). */
  since: (procedureId: string, ruleId: string) => string | null;
}

const findingKey = (s: string, p: string, r: string) => `${s}\0${p}\0${r}`;

/**
 * Whether the verdict a pattern goes by covers a finding (on this procedure and wording of the
 * rule): not when the verdict is older than the finding's wording (verdictCovers). What its
 * suppression and the reworded review state both read.
 */
export function covers(ctx: VerdictContext, f: { procedure_id: string; rule_id: string }): boolean {
  const v = ctx.verdict;
  return v !== null && verdictCovers(v.created_at, { rule_id: f.rule_id, wording_since: ctx.since(f.procedure_id, f.rule_id) }, ctx.wording);
}

/**
 * The writes every review change ends with, in the change's transaction: each finding's
 * suppression from its pattern's verdict and its override (the domain's isSuppressed), then
 * the roll-up of the sessions whose suppression changed (results with suppressed rules read as
 * passed, the session's result the worst of its checks').
 */
export class ReviewWrites {
  constructor(readonly repo: PatternsRepo = new PatternsRepo()) {}

  /** The verdict context of these patterns (their parents read for inherited verdicts). */
  async contexts(q: Queryable, patterns: readonly PatternRecord[]): Promise<Map<string, VerdictContext>> {
    const byId = new Map(patterns.map((p) => [p.id, p]));
    const missingParents = [...new Set(patterns.map((p) => p.parent_id).filter((id): id is string => id !== null && !byId.has(id)))];
    for (const p of await this.repo.patternsByIds(q, missingParents)) byId.set(p.id, p);
    // A verdict covers a finding only if not older than the finding's own wording (verdictCovers).
    const since = new Map<string, (procedureId: string, ruleId: string) => string | null>();
    for (const ws of new Set(patterns.map((p) => p.workspace))) {
      const lineage = new LineageRepo();
      since.set(ws, wordingSince(await lineage.rows(q, ws), await lineage.returns(q, ws)));
    }
    const verdicts = await this.repo.verdicts(q, [...byId.keys()]);
    const own = new Map<string, VerdictRecord[]>();
    for (const v of verdicts) (own.get(v.pattern_id) ?? own.set(v.pattern_id, []).get(v.pattern_id)!).push(v);
    const out = new Map<string, VerdictContext>();
    for (const p of patterns) {
      const mine = own.get(p.id) ?? [];
      const parent = p.parent_id ? byId.get(p.parent_id) : undefined;
      const rule = parent ?? p;
      out.set(p.id, {
        pattern: p,
        // newest first from the repository: the first is the verdict, the rest its history
        verdict: effectiveVerdict(mine[0] ?? null, parent ? (own.get(parent.id)?.[0] ?? null) : null),
        history: mine.slice(1),
        wording: { rule_id: rule.rule_id, since: rule.reworded_at },
        since: since.get(p.workspace) ?? (() => null),
      });
    }
    return out;
  }

  suppressed(f: Pick<FindingRef, 'rule_id' | 'procedure_id'>, ctx: VerdictContext | undefined, override: Pick<OverrideRecord, 'correct'> | undefined): boolean {
    const v = ctx?.verdict ?? null;
    return isSuppressed({
      verdict: v?.verdict ?? null,
      verdictCovers: ctx !== undefined && covers(ctx, f),
      override: override ? { correct: override.correct } : null,
    });
  }

  /** Suppression again for these findings (after a verdict or an override); returns the sessions whose findings changed. */
  async resuppress(q: Queryable, findings: readonly FindingRef[]): Promise<string[]> {
    const patternIds = [...new Set(findings.map((f) => f.pattern_id).filter((id): id is string => id !== null))];
    const ctx = await this.contexts(q, await this.repo.patternsByIds(q, patternIds));
    const overrides = await this.overridesOf(q, findings);
    const changed = findings
      .map((f) => ({ f, suppressed: this.suppressed(f, f.pattern_id ? ctx.get(f.pattern_id) : undefined, overrides.get(findingKey(f.session_id, f.procedure_id, f.rule_id))) }))
      .filter((x) => x.suppressed !== x.f.suppressed);
    for (const part of chunks(changed, 5000)) await this.repo.setSuppressed(q, part.map((x) => ({ id: x.f.id, suppressed: x.suppressed })));
    return [...new Set(changed.map((x) => x.f.session_id))];
  }

  async overridesOf(q: Queryable, findings: readonly Pick<FindingRef, 'session_id' | 'procedure_id' | 'rule_id'>[]): Promise<Map<string, OverrideRecord>> {
    const out = new Map<string, OverrideRecord>();
    for (const part of chunks(findings, 5000)) {
      for (const o of await this.repo.overrides(q, part)) out.set(findingKey(o.session_id, o.procedure_id, o.rule_id), o);
    }
    return out;
  }

  /** Rolls these sessions' check and session results up again from their findings' suppression. */
  async rollUp(q: Queryable, sessionIds: readonly string[]): Promise<void> {
    const locks = new Map<string, Map<string, boolean>>();
    for (const ids of chunks([...new Set(sessionIds)], 500)) {
      const checks = await this.repo.checksForRollup(q, ids);
      const suppressed = new Set((await this.repo.suppressedRules(q, ids)).map((r) => findingKey(r.session_id, r.procedure_id, r.rule_id)));
      const releases = [...new Set(checks.map((c) => c.release_id).filter((r): r is string => r !== null && !locks.has(r)))];
      for (const [id, lock] of await this.repo.releaseLocks(q, releases)) locks.set(id, requiredMap(lock as Lock));
      const checkRows: { session_id: string; procedure_id: string; result: string | null }[] = [];
      const bySession = new Map<string, { result: ProcedureResult | null; checked_result: ProcedureResult | null }[]>();
      for (const c of checks) {
        const required = c.release_id ? locks.get(c.release_id) : undefined;
        const ruleIds = new Set(c.rules.filter((r) => suppressed.has(findingKey(c.session_id, c.procedure_id, r.rule_id))).map((r) => r.rule_id));
        const result = rollUpCheck(c as unknown as Pick<ProcedureCheck, 'rules' | 'goal_reached' | 'checked_result'>, ruleIds, (id) => required?.get(`${c.procedure_id}\0${id}`) ?? false);
        if (result !== c.result) checkRows.push({ session_id: c.session_id, procedure_id: c.procedure_id, result });
        (bySession.get(c.session_id) ?? bySession.set(c.session_id, []).get(c.session_id)!).push({ result, checked_result: c.checked_result as ProcedureResult | null });
      }
      await this.repo.setCheckResults(q, checkRows);
      await this.repo.setSessionResults(q, [...bySession].map(([session_id, cs]) => ({ session_id, ...rollUpSession(cs) })));
    }
  }
}

function requiredMap(lock: Lock | undefined): Map<string, boolean> {
  const m = new Map<string, boolean>();
  for (const p of lock?.procedures ?? []) for (const r of p.rules) m.set(`${p.procedure_id}\0${r.rule_id}`, r.required);
  return m;
}

export { findingKey };
