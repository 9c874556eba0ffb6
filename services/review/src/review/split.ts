import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '@neatroots/ports';
import { excerpt, MalformedSplit, planRecluster, readSplit, ruleLabel, SPLIT_ASK, SPLIT_INSTRUCTIONS, SPLIT_MAX_FINDINGS, splitAnswerTokens, splitSubject, type OldCluster } from '@neatroots/review-domain';
import type { DecisionGateway } from '@neatroots/sop';
import { ClustersRepo, type ClusterFinding, type PatternRecord, type VerdictRecord } from '@neatroots/store';
import type { ReviewWrites } from './writes';

/** A new failure mode's (or a rule's `other`'s) id: random, since a split is not keyed by anything stable. */
export const childPatternId = (): string => `pat_${randomBytes(16).toString('base64url').slice(0, 22)}`;

/** Findings the model reads for one split: the newest, so a prompt stays a prompt; the others stay where they are. */
export { SPLIT_MAX_FINDINGS };

/** The name of a rule's catch-all failure mode. */
export const OTHER_NAME = 'Other';

export type SplitOutcome = { ok: true; modes: number } | { ok: false; reason: string };

export const quoteOf = (f: Pick<ClusterFinding, 'evidence' | 'reason'>): string => excerpt(f.evidence as { quote?: string | null }[], f.reason);

/**
 * SplitRulePattern: the reasoning model splits a rule pattern's findings into at most 5 named
 * failure modes plus `other` (split-2), then the split is written against the old one: new
 * clusters matched to the old failure modes by member overlap keep their id, name and verdicts;
 * unmatched old ones are retired, their verdict carried over (planRecluster). The split judges
 * only what the model was shown (the newest SPLIT_MAX_FINDINGS): matching, "material" and
 * carry-over are measured on each old failure mode's shown findings, and an old failure mode
 * with none shown is kept as it is. The model is asked outside any transaction; the write holds
 * the workspace's lock and reads the findings again, so findings that arrived meanwhile (or that
 * the model was not shown) stay in their failure mode when it is kept, else go to `other`.
 */
export class RuleSplitter {
  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites,
    private readonly clusters: ClustersRepo = new ClustersRepo(),
  ) {}

  async split(workspace: string, rule: PatternRecord, gateway: DecisionGateway): Promise<SplitOutcome> {
    // Findings stored from now on count as new since this clustering.
    const startedAt = new Date().toISOString();
    const shown = (await this.clusters.findingsOfRule(this.db, rule.id)).slice(-SPLIT_MAX_FINDINGS);
    const subject = splitSubject(
      { procedure_name: rule.procedure_name, rule_label: ruleLabel(rule.rule_kind, rule.rule_index), rule_text: rule.rule_text },
      shown.map((f) => ({ id: f.id, quote: quoteOf(f) })),
    );
    // The answer lists every finding shown: its budget grows with them (the default fits a name, not 200 findings).
    const reply = await gateway.decide('reasoning', { instructions: SPLIT_INSTRUCTIONS, subject, ask: SPLIT_ASK, max_tokens: splitAnswerTokens(shown.length) });
    if (!reply.ok) return { ok: false, reason: `the model failed: ${reply.reason}` };
    let result;
    try {
      result = readSplit(reply.answer, shown.map((f) => f.id));
    } catch (err) {
      if (err instanceof MalformedSplit) return { ok: false, reason: `the model's answer was unusable: ${err.message}` };
      throw err;
    }
    await this.db.transaction((tx) => this.write(tx, workspace, rule, shown, result.failure_modes, startedAt));
    return { ok: true, modes: result.failure_modes.length };
  }

  private async write(tx: Queryable, workspace: string, rule: PatternRecord, shown: readonly ClusterFinding[], modes: readonly { name: string; findings: string[] }[], at: string): Promise<void> {
    const repo = this.writes.repo;
    await repo.lockWorkspace(tx, workspace);
    const active = (await repo.children(tx, rule.id)).filter((c) => c.retired_at === null);
    const subs = active.filter((c) => c.kind === 'sub');
    const oldOther = active.find((c) => c.kind === 'other')?.id;
    // No failure mode at all: the rule is (again) one pattern, and its findings go back to it.
    const whole = modes.length === 0;
    let other = whole ? rule.id : oldOther;
    if (!other) {
      other = childPatternId();
      await this.clusters.insertChild(tx, { id: other, parent_id: rule.id, kind: 'other', name: OTHER_NAME, named_by: 'model', description: null });
    }
    const current = await this.clusters.findingsOfRule(tx, rule.id);
    const wasShown = new Set(shown.map((f) => f.id));
    const own = latestOwn(await repo.verdicts(tx, subs.map((s) => s.id)));
    // Each old failure mode as the model saw it: only its shown findings are compared (a mode of
    // 800 whose 200 shown come back together is the same mode). One with none shown was not
    // judged: it stays as it is (unless the rule is whole again).
    const judged = subs
      .map((s) => ({ id: s.id, findings: current.filter((f) => f.pattern_id === s.id && wasShown.has(f.id)).map((f) => f.id), verdict: own.get(s.id) ?? null }))
      .filter((o) => whole || o.findings.length > 0);
    const old: OldCluster<VerdictRecord>[] = judged;
    const plan = planRecluster(old, modes);

    const ids = plan.clusters.map((c) => c.id ?? childPatternId());
    for (const [i, c] of plan.clusters.entries()) {
      if (c.id === null) await this.clusters.insertChild(tx, { id: ids[i], parent_id: rule.id, kind: 'sub', name: modes[i].name, named_by: 'model', description: null });
      if (c.carried) await this.clusters.carryVerdict(tx, workspace, ids[i], c.carried.verdict);
    }
    await this.clusters.setMaterial(tx, plan.clusters.filter((c) => c.material).map((c) => c.id!));
    const retired = new Set(plan.retired.map((r) => r.id));
    if (whole) for (const s of subs) retired.add(s.id);
    if (whole && oldOther) retired.add(oldOther);
    await this.clusters.retire(tx, [...retired], at);

    // Where each finding goes: the model's answer for what it was shown; the rest stay in a kept failure mode, else other.
    const target = new Map<string, string>();
    modes.forEach((m, i) => m.findings.forEach((id) => target.set(id, ids[i])));
    const keep = new Set([...subs.map((s) => s.id).filter((id) => !retired.has(id)), other]);
    const ctx = await this.writes.contexts(tx, [rule, ...(await repo.children(tx, rule.id))]);
    const overrides = await this.writes.overridesOf(tx, current);
    const moves = current
      .map((f) => {
        const to = target.get(f.id) ?? (!wasShown.has(f.id) && f.pattern_id && keep.has(f.pattern_id) ? f.pattern_id : other);
        const suppressed = this.writes.suppressed(f, ctx.get(to), overrides.get(`${f.session_id}\0${f.procedure_id}\0${f.rule_id}`));
        return { id: f.id, from: f.pattern_id, pattern_id: to, suppressed, session_id: f.session_id, changed: to !== f.pattern_id || suppressed !== f.suppressed };
      })
      .filter((m) => m.changed);
    await this.clusters.moveFindings(tx, moves);
    const before = new Map(current.map((f) => [f.id, f.suppressed]));
    await this.writes.rollUp(tx, [...new Set(moves.filter((m) => m.suppressed !== before.get(m.id)).map((m) => m.session_id))]);
    await this.clusters.setClustered(tx, [...new Set([rule.id, other, ...ids])], at);
  }
}

/** Each pattern's own latest verdict (the repository answers newest first). */
export function latestOwn(verdicts: readonly VerdictRecord[]): Map<string, VerdictRecord> {
  const out = new Map<string, VerdictRecord>();
  for (const v of verdicts) if (!out.has(v.pattern_id)) out.set(v.pattern_id, v);
  return out;
}
