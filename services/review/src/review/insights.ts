import type { Db } from '@neatroots/ports';
import { ruleLabel } from '@neatroots/review-domain';
import { ReviewReadRepo, type InsightsView, type ResultCounts, type WindowQuery } from '@neatroots/store';
import type { ReviewWrites } from './writes';
import { resolveWindow, weeksOf } from './window';

/** Results counted from none. */
export const zeroResults = (): ResultCounts => ({ deviated: 0, partial: 0, followed: 0, not_measurable: 0 });

/** followed / (followed + partial + deviated): not_measurable is left out of rates. */
export function followRate(r: ResultCounts): number | null {
  const judged = r.followed + r.partial + r.deviated;
  return judged === 0 ? null : r.followed / judged;
}

/** Adds `n` sessions of `result` (a check not checked, null, counts nowhere). */
export function addResult(into: ResultCounts, result: string | null, n: number): void {
  if (result !== null && result in into) into[result as keyof ResultCounts] += n;
}

/**
 * GET /insights: tiles, a scoreboard row per procedure and a ladder row per rule with a weekly
 * trend, over the sessions of the window. Results are the rolled-up ones (suppressed findings
 * read as passed) and suppressed findings are in no count or rate: they are shown on their own
 * (`suppressed` on tiles, rows and the ladder).
 *
 * Filters: `procedure` narrows everything to that procedure (session results are its check's);
 * `rule` narrows findings and the ladder to the rule's lineage, and sessions to the
 * procedures the rule is in.
 */
export async function insights(db: Db, writes: ReviewWrites, workspace: string, q: WindowQuery): Promise<InsightsView> {
  const window = resolveWindow(q);
  const read = new ReviewReadRepo(db);
  let procedures: string[] | undefined = q.procedure !== undefined ? [q.procedure] : undefined;
  if (q.rule !== undefined) {
    const ofRule = await read.proceduresOfRule(workspace, q.rule);
    procedures = procedures ? procedures.filter((p) => ofRule.includes(p)) : ofRule;
  }
  const [sessionRows, checkRows, findingRows, patterns, live, unmeasured] = await Promise.all([
    read.sessionResults(workspace, window, procedures),
    read.checkResults(workspace, window),
    read.findingsByWeek(workspace, window, { procedure: q.procedure, lineage: q.rule }),
    writes.repo.patternsOf(db, workspace),
    read.liveProcedureNames(workspace),
    read.unmeasuredFindings(workspace, window),
  ]);

  const names = new Map<string, string | null>();
  for (const p of patterns) if (!names.has(p.procedure_id)) names.set(p.procedure_id, p.procedure_name);
  for (const p of live) names.set(p.procedure_id, p.name);

  const results = zeroResults();
  let sessions = 0;
  for (const r of sessionRows) {
    sessions += r.n;
    addResult(results, r.result, r.n);
  }

  const weeks = weeksOf(window);
  const weekIndex = new Map(weeks.map((w, i) => [w, i]));
  const board = new Map<string, { sessions: number; results: ResultCounts; weekly: ResultCounts[]; findings: number; suppressed: number }>();
  const row = (id: string) => board.get(id) ?? board.set(id, { sessions: 0, results: zeroResults(), weekly: weeks.map(zeroResults), findings: 0, suppressed: 0 }).get(id)!;
  for (const c of checkRows) {
    if (procedures && !procedures.includes(c.procedure_id)) continue;
    const b = row(c.procedure_id);
    b.sessions += c.n;
    addResult(b.results, c.result, c.n);
    const i = weekIndex.get(c.week);
    if (i !== undefined) addResult(b.weekly[i], c.result, c.n);
  }

  const byPattern = new Map(patterns.map((p) => [p.id, p]));
  const ladder = new Map<string, InsightsView['ladder'][number]>();
  let findings = 0;
  let suppressed = 0;
  for (const f of findingRows) {
    const p = f.rule_pattern_id ? byPattern.get(f.rule_pattern_id) : undefined;
    const procedureId = p?.procedure_id ?? f.procedure_id;
    if (procedureId === null) continue; // a pattern deleted since (never: patterns are kept)
    const b = row(procedureId);
    if (f.suppressed) {
      suppressed += f.n;
      b.suppressed += f.n;
    } else {
      findings += f.n;
      b.findings += f.n;
    }
    if (!p) continue; // not assigned to a pattern yet: counted above, on no rung
    const rung =
      ladder.get(p.id) ??
      ladder
        .set(p.id, { pattern_id: p.id, procedure_id: p.procedure_id, rule_id: p.lineage_id, label: ruleLabel(p.rule_kind, p.rule_index), name: p.name, text: p.rule_text, findings: 0, suppressed: 0, sessions: 0, rate: null, trend: weeks.map(() => 0) })
        .get(p.id)!;
    if (f.suppressed) rung.suppressed += f.n;
    else {
      rung.findings += f.n;
      const i = weekIndex.get(f.week);
      if (i !== undefined) rung.trend[i] += f.n;
    }
  }
  // A rung's rate: the share of its procedure's measurable checks with a finding of it (not_measurable ones left out of both).
  const unmeasuredOf = new Map(unmeasured.map((u) => [u.rule_pattern_id, u.n]));
  for (const rung of ladder.values()) {
    const b = board.get(rung.procedure_id);
    rung.sessions = b?.sessions ?? 0;
    const judged = b ? b.results.followed + b.results.partial + b.results.deviated : 0;
    rung.rate = judged ? Math.max(0, rung.findings - (unmeasuredOf.get(rung.pattern_id) ?? 0)) / judged : null;
  }

  return {
    window,
    filters: { procedure: q.procedure ?? null, rule: q.rule ?? null },
    tiles: { sessions, results, follow_rate: followRate(results), findings, suppressed },
    scoreboard: [...board]
      .map(([id, b]) => ({
        procedure_id: id,
        procedure_name: names.get(id) ?? id,
        sessions: b.sessions,
        results: b.results,
        follow_rate: followRate(b.results),
        weekly_follow_rate: b.weekly.map(followRate),
        findings: b.findings,
        suppressed: b.suppressed,
      }))
      .sort((a, b) => b.sessions - a.sessions || (a.procedure_id < b.procedure_id ? -1 : 1)),
    weeks,
    ladder: [...ladder.values()].sort((a, b) => b.findings - a.findings || b.suppressed - a.suppressed || (a.pattern_id < b.pattern_id ? -1 : 1)),
  };
}
