import { createHash } from 'node:crypto';
import type { Db, Queryable } from '@neatroots/ports';
import { Lineage, lineageIdOf, nameFromRuleText } from '@neatroots/review-domain';
import { LineageRepo, wordingSince, type FindingRef, type NewRulePattern, type PatternRecord, type PatternsRepo, type Wording } from '@neatroots/store';
import type { PatternNamer } from './namer';
import { findingKey, ReviewWrites } from './writes';

/** The BullMQ queue (the seed's Hatchet sopops_patterns workflow): one run at a time per workspace. */
export const PATTERNS_QUEUE = 'sopops_patterns';

export interface PatternsJob {
  workspace: string;
}

/** A rule pattern's id: stable for its key, so two writers racing create one pattern. */
export function rulePatternId(workspace: string, procedureId: string, lineageId: string): string {
  return `pat_${createHash('sha256').update(`${workspace}\0${procedureId}\0${lineageId}\0rule`).digest('base64url').slice(0, 22)}`;
}

/**
 * Creates a rule pattern under its key. Its id is derived from the key (so two writers racing
 * create one), unless a pattern that has since moved to another key (rule lineage) holds that
 * id: then the next derived one. Returns the id of the pattern holding the key afterwards, and
 * whether this call created it.
 */
export async function insertRulePattern(q: Queryable, repo: PatternsRepo, p: Omit<NewRulePattern, 'id'>): Promise<{ id: string; created: boolean }> {
  const base = rulePatternId(p.workspace, p.procedure_id, p.lineage_id);
  for (let attempt = 0; attempt < 100; attempt++) {
    const id = attempt === 0 ? base : `pat_${createHash('sha256').update(`${base}\0${attempt}`).digest('base64url').slice(0, 22)}`;
    if (await repo.insertRulePattern(q, { ...p, id })) return { id, created: true };
    const held = await repo.rulePatterns(q, p.workspace, [{ procedure_id: p.procedure_id, lineage_id: p.lineage_id }]);
    if (held[0]) return { id: held[0].id, created: false };
  }
  throw new Error(`no free id for the rule pattern of ${p.procedure_id}/${p.lineage_id}`);
}

/** How many findings one transaction assigns. */
const BATCH = 1000;

/**
 * Assigns a workspace's findings that have no pattern yet (after each check, and at start
 * for what a stop left): every finding on one rule, in every wording it has had, goes into one
 * rule pattern keyed by (procedure, lineage id), created with the rule's first finding and
 * named then from the rule's text (named_by rule_text; a model names it later). The pattern
 * shows the rule as the most recent session ran it. Each finding's suppression follows from
 * its pattern's verdict and its override, and its session is rolled up again. With a namer,
 * the patterns it created are then named by the reasoning model, once, after the transaction
 * (a failure keeps the rule-text name for `sopops patterns rename`).
 *
 * Findings go to their rule pattern here; on a rule split into failure modes, the
 * FailureModeAssigner (modes.ts) then sends each to one of them, or to `other`, by a decision.
 */
export class PatternAssigner {
  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites = new ReviewWrites(),
    private readonly namer?: PatternNamer,
  ) {}

  /** Returns how many findings it assigned. Idempotent: a second run finds nothing to do. */
  async assign(workspace: string): Promise<number> {
    let total = 0;
    const created: string[] = [];
    for (;;) {
      const n = await this.db.transaction((tx) => this.assignBatch(tx, workspace, created));
      total += n;
      if (n < BATCH) break;
    }
    if (created.length && this.namer) {
      // Naming is best effort: the findings are assigned whatever the model does.
      await this.namer.rename(workspace, { ids: created }).catch(() => undefined);
    }
    return total;
  }

  /** Workspaces with findings waiting for a pattern. */
  async pending(): Promise<string[]> {
    return this.writes.repo.workspacesWithUnassigned(this.db);
  }

  private async assignBatch(tx: Queryable, workspace: string, createdIds: string[]): Promise<number> {
    const repo = this.writes.repo;
    await repo.lockWorkspace(tx, workspace);
    const found = await repo.unassigned(tx, workspace, BATCH);
    if (!found.length) return 0;
    const sessionIds = [...new Set(found.map((f) => f.session_id))];
    // Rule patterns are keyed by lineage id: the stored rule_lineage rows say each rule's.
    const lineageRows = await new LineageRepo().rows(tx, workspace);
    const lineage = new Lineage(lineageRows.map((r) => ({ procedure_id: r.procedure_id, rule_id: r.rule_id, previous_rule_id: r.previous_rule_id, how: r.how, similarity: r.similarity })));
    const since = wordingSince(lineageRows, await new LineageRepo().returns(tx, workspace));

    // The wording each rule pattern shows: the rule as the most recent of these sessions ran it.
    const latest = new Map<string, Wording>();
    const consider = (procedureId: string, w: Omit<Wording, 'reworded_at'>) => {
      const key = `${procedureId}\0${lineageIdOf(procedureId, w.rule_id, lineage)}`;
      const cur = latest.get(key);
      if (!cur || w.rule_ran_at > cur.rule_ran_at) latest.set(key, { ...w, reworded_at: null });
    };
    for (const s of await repo.sessionRules(tx, sessionIds)) {
      for (const r of s.rules) consider(s.procedure_id, { procedure_name: s.procedure_name, rule_id: r.rule_id, rule_kind: r.kind, rule_index: r.index, rule_text: r.text, rule_ran_at: s.at });
    }
    // A finding whose check body lacks the rule (never expected) still gets its own wording.
    for (const f of found) {
      const key = `${f.procedure_id}\0${lineageIdOf(f.procedure_id, f.rule_id, lineage)}`;
      if (!latest.has(key)) consider(f.procedure_id, { procedure_name: f.procedure_id, rule_id: f.rule_id, rule_kind: f.kind, rule_index: f.index, rule_text: f.text, rule_ran_at: f.at });
    }

    const keys = [...latest.keys()].map((k) => {
      const [procedure_id, lineage_id] = k.split('\0');
      return { procedure_id, lineage_id };
    });
    const patterns = new Map<string, PatternRecord>((await repo.rulePatterns(tx, workspace, keys)).map((p) => [`${p.procedure_id}\0${p.lineage_id}`, p]));

    // Existing patterns take a newer wording; the rules with a finding and no pattern get one.
    const reworded: string[] = [];
    for (const [key, w] of latest) {
      const p = patterns.get(key);
      if (p) {
        if (w.rule_ran_at < p.rule_ran_at) continue;
        const same = p.rule_id === w.rule_id && p.rule_text === w.rule_text && p.rule_index === w.rule_index && p.procedure_name === w.procedure_name;
        // A wording is dated from when it came to be, or from the latest release that brought it back
        // (A, B, then A again): a verdict given while B was live did not judge A as it runs again.
        const back = since(p.procedure_id, w.rule_id);
        const reworded_at = p.rule_id !== w.rule_id ? (back ?? w.rule_ran_at) : back !== null && (p.reworded_at === null || back > p.reworded_at) ? back : p.reworded_at;
        if (same && reworded_at === p.reworded_at) continue;
        const next: Wording = { ...w, reworded_at };
        await repo.updateWording(tx, p.id, next);
        if (reworded_at !== p.reworded_at) reworded.push(p.id);
        patterns.set(key, { ...p, ...next });
      }
    }
    const needed = new Set(found.map((f) => `${f.procedure_id}\0${lineageIdOf(f.procedure_id, f.rule_id, lineage)}`));
    const created: string[] = [];
    for (const key of needed) {
      if (patterns.has(key)) continue;
      const [procedureId, lineageId] = key.split('\0');
      const w = latest.get(key)!;
      const made = await insertRulePattern(tx, repo, { workspace, procedure_id: procedureId, procedure_name: w.procedure_name, lineage_id: lineageId, name: nameFromRuleText(w.rule_text), rule_id: w.rule_id, rule_kind: w.rule_kind, rule_index: w.rule_index, rule_text: w.rule_text, rule_ran_at: w.rule_ran_at });
      if (made.created) createdIds.push(made.id);
      created.push(key);
    }
    if (created.length) {
      for (const p of await repo.rulePatterns(tx, workspace, created.map((k) => ({ procedure_id: k.split('\0')[0], lineage_id: k.split('\0')[1] })))) {
        patterns.set(`${p.procedure_id}\0${p.lineage_id}`, p);
      }
    }

    const ctx = await this.writes.contexts(tx, [...patterns.values()]);
    const overrides = await this.writes.overridesOf(tx, found);
    const rows = found.map((f: FindingRef) => {
      const p = patterns.get(`${f.procedure_id}\0${lineageIdOf(f.procedure_id, f.rule_id, lineage)}`)!;
      const o = overrides.get(findingKey(f.session_id, f.procedure_id, f.rule_id));
      return { id: f.id, pattern_id: p.id, rule_pattern_id: p.id, suppressed: this.writes.suppressed(f, ctx.get(p.id), o) };
    });
    await repo.setAssignment(tx, rows);
    // The wording's date moved (a wording back since the verdict: A, B, then A again): the verdict
    // no longer covers its findings, those of its first time included, as the reworded review
    // state counts them, until a verdict confirms it. Its findings stored before are read again.
    const assigned = new Set(found.map((f) => f.id));
    const moved = reworded.length ? await this.writes.resuppress(tx, (await repo.findingsOfPatterns(tx, reworded)).filter((f) => !assigned.has(f.id))) : [];
    // A re-check stores the checker's results: roll them up again with what is suppressed.
    await this.writes.rollUp(tx, [...new Set([...sessionIds, ...moved])]);
    return found.length;
  }
}
