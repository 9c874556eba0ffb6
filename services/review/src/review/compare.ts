import type { Db } from '@neatroots/ports';
import { Lineage, LineageCycleError, ruleLabel } from '@neatroots/review-domain';
import type { Lock } from '@neatroots/sop';
import { LineageRepo, ReviewReadRepo, SopError, WorkspaceRepo, type CompareQuery, type CompareSide, type LineageRow, type ReleaseCompareView, type ReleaseRecord } from '@neatroots/store';
import { addResult, followRate, zeroResults } from './insights';
import type { ReviewWrites } from './writes';

const side = (): CompareSide => ({ sessions: 0, results: zeroResults(), follow_rate: null, findings: 0, suppressed: 0, rate: null });

/**
 * GET /insights/compare: two releases side by side, over the sessions checked on each (a
 * session is checked on the release it asked for, else the one live then). Per procedure, its
 * sessions, results, follow rate and findings per measurable session on each release (its
 * `rate`, counted as its rules' are); per rule pattern, its findings and their
 * rate on each: the share of the procedure's measurable sessions on that release (followed,
 * partial or deviated; not_measurable ones are left out of rates, as fix tracking leaves them
 * out) with a finding of the rule, null when the release has no wording of the rule (or no
 * measurable session). Rule patterns follow the rule's lineage, so a rule reworded between the
 * two releases (by a suggestion or by hand) is one row: whether the new wording is followed
 * better is the row's two rates. Suppressed findings are in no count or rate, shown apart, as
 * in Insights.
 */
export async function compareReleases(db: Db, writes: ReviewWrites, workspace: string, q: CompareQuery): Promise<ReleaseCompareView> {
  const repo = new WorkspaceRepo(db);
  const to = await must(repo, workspace, q.to ?? 'live', 'to');
  const from = q.from !== undefined ? await must(repo, workspace, q.from, 'from') : await repo.release<Lock>(workspace, String(to.number - 1));
  if (!from) throw new SopError(409, 'no_earlier_release', `release ${to.number} is the workspace's first: there is nothing to compare it with (give from)`);
  if (from.id === to.id) throw new SopError(400, 'invalid_query', `from and to are the same release (${to.number})`);
  const read = new ReviewReadRepo(db);
  const ids = [from.id, to.id];
  const [checks, findings, patterns, lineageRows] = await Promise.all([
    read.checksByRelease(workspace, ids),
    read.findingsByRelease(workspace, ids),
    writes.repo.patternsOf(db, workspace),
    new LineageRepo().rows(db, workspace),
  ]);
  const rulesOf = lineagesIn(lineageRows);
  const has = { from: rulesOf(from), to: rulesOf(to) };

  type Row = ReleaseCompareView['procedures'][number];
  const rows = new Map<string, Row>();
  const names = new Map<string, string>();
  for (const r of [from, to]) for (const p of r.lock.procedures) names.set(p.procedure_id, p.name);
  const inRelease = (r: ReleaseRecord<Lock>, id: string) => r.lock.procedures.some((p) => p.procedure_id === id);
  const row = (id: string): Row =>
    rows.get(id) ??
    rows
      .set(id, { procedure_id: id, procedure_name: names.get(id) ?? id, in_from: inRelease(from, id), in_to: inRelease(to, id), from: side(), to: side(), rules: [] })
      .get(id)!;
  const sideOf = (r: Row, releaseId: string) => (releaseId === from.id ? r.from : r.to);

  for (const c of checks) {
    if (q.procedure !== undefined && c.procedure_id !== q.procedure) continue;
    const s = sideOf(row(c.procedure_id), c.release_id);
    s.sessions += c.n;
    addResult(s.results, c.result, c.n);
  }
  const byPattern = new Map(patterns.map((p) => [p.id, p]));
  const rules = new Map<string, Row['rules'][number]>();
  /** Per procedure side, its findings (not suppressed) in measurable checks: its rate's numerator. */
  const measuredOn = new Map<CompareSide, number>();
  /** Per rule pattern, its findings (not suppressed) in measurable checks on each side: a rate's numerator. */
  const measured = new Map<string, { from: number; to: number }>();
  for (const f of findings) {
    const p = f.rule_pattern_id ? byPattern.get(f.rule_pattern_id) : undefined;
    const procedureId = p?.procedure_id ?? f.procedure_id;
    if (q.procedure !== undefined && procedureId !== q.procedure) continue;
    const r = row(procedureId);
    const s = sideOf(r, f.release_id);
    if (f.suppressed) s.suppressed += f.n;
    else s.findings += f.n;
    if (!f.suppressed && f.measurable) measuredOn.set(s, (measuredOn.get(s) ?? 0) + f.n);
    if (!p) continue; // not in a pattern yet: counted on the procedure, on no rule's row
    let rule = rules.get(p.id);
    if (!rule) {
      rule = { pattern_id: p.id, rule_id: p.lineage_id, label: ruleLabel(p.rule_kind, p.rule_index), name: p.name, text: p.rule_text, from: { findings: 0, suppressed: 0, rate: null }, to: { findings: 0, suppressed: 0, rate: null } };
      rules.set(p.id, rule);
      r.rules.push(rule);
    }
    const onFrom = f.release_id === from.id;
    const at = onFrom ? rule.from : rule.to;
    if (f.suppressed) at.suppressed += f.n;
    else at.findings += f.n;
    if (!f.suppressed && f.measurable) {
      const m = measured.get(p.id) ?? measured.set(p.id, { from: 0, to: 0 }).get(p.id)!;
      if (onFrom) m.from += f.n;
      else m.to += f.n;
    }
  }
  for (const r of rows.values()) {
    for (const s of [r.from, r.to]) {
      s.follow_rate = followRate(s.results);
      const judged = s.results.followed + s.results.partial + s.results.deviated;
      s.rate = judged ? (measuredOn.get(s) ?? 0) / judged : null;
    }
    for (const rule of r.rules) {
      const m = measured.get(rule.pattern_id) ?? { from: 0, to: 0 };
      for (const side of ['from', 'to'] as const) {
        const judged = r[side].results.followed + r[side].results.partial + r[side].results.deviated;
        // A release without the rule has no rate for it; one with findings of it has the rule, whatever the lineage says.
        const ran = has[side].has(`${r.procedure_id}\0${rule.rule_id}`) || rule[side].findings + rule[side].suppressed > 0;
        rule[side].rate = ran && judged ? m[side] / judged : null;
      }
    }
    r.rules.sort((a, b) => b.to.findings + b.from.findings - (a.to.findings + a.from.findings) || (a.pattern_id < b.pattern_id ? -1 : 1));
  }
  // The procedures of either release, even with no session on them yet.
  for (const r of [to, from]) for (const p of r.lock.procedures) if (q.procedure === undefined || q.procedure === p.procedure_id) row(p.procedure_id);

  const brief = (r: ReleaseRecord<Lock>) => ({ id: r.id, number: r.number, created_at: r.created_at });
  return {
    from: brief(from),
    to: brief(to),
    filters: { procedure: q.procedure ?? null },
    procedures: [...rows.values()].sort((a, b) => b.to.sessions + b.from.sessions - (a.to.sessions + a.from.sessions) || (a.procedure_id < b.procedure_id ? -1 : 1)),
  };
}

/** The lineages (procedure id, NUL, lineage id) with a wording in a release, by the workspace's lineage rows. */
function lineagesIn(rows: readonly LineageRow[]): (r: ReleaseRecord<Lock>) => Set<string> {
  const lineage = new Lineage(rows.map((l) => ({ procedure_id: l.procedure_id, rule_id: l.rule_id, previous_rule_id: l.previous_rule_id, how: l.how, similarity: l.similarity })));
  const idOf = (procedureId: string, ruleId: string) => {
    try {
      return lineage.lineageId(procedureId, ruleId);
    } catch (err) {
      if (err instanceof LineageCycleError) return ruleId;
      throw err;
    }
  };
  return (r) => new Set(r.lock.procedures.flatMap((p) => p.rules.map((rule) => `${p.procedure_id}\0${idOf(p.procedure_id, rule.rule_id)}`)));
}

async function must(repo: WorkspaceRepo, workspace: string, ref: string, field: 'from' | 'to'): Promise<ReleaseRecord<Lock>> {
  const r = await repo.release<Lock>(workspace, ref);
  if (!r) throw new SopError(404, 'not_found', `${field}: no release ${ref} in workspace ${workspace}${ref === 'live' ? ' (nothing published yet)' : ''}`);
  return r;
}
