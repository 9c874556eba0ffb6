import type { Db, Queryable } from '@neatroots/ports';
import { isVerdict, VERDICTS } from '@neatroots/review-domain';
import { SopError, type OverrideInput, type OverrideView, type VerdictGivenView, type VerdictInput } from '@neatroots/store';
import { stateOf, verdictView } from './facts';
import { ReviewWrites } from './writes';

const MAX_TEXT = 10_000;

/**
 * Verdicts on patterns and overrides of single findings, each in one transaction under the
 * workspace's lock: append, recompute the suppression of the findings it touches, roll their
 * sessions up again. Suppressed findings are kept and flagged, never deleted.
 */
export class Verdicts {
  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites = new ReviewWrites(),
  ) {}

  /** POST /patterns/{id}/verdict: appended (the latest is the verdict); its findings suppressed or not accordingly. */
  async give(workspace: string, patternId: string, raw: unknown): Promise<VerdictGivenView> {
    const input = verdictInput(raw);
    const repo = this.writes.repo;
    return this.db.transaction(async (tx) => {
      await repo.lockWorkspace(tx, workspace);
      const pattern = await repo.pattern(tx, workspace, patternId);
      if (!pattern) throw new SopError(404, 'not_found', `no pattern ${patternId} in workspace ${workspace}`);
      const given = await repo.addVerdict(tx, workspace, pattern.id, { verdict: input.verdict, note: input.note ?? null, reviewer: input.reviewer ?? null });
      // Its failure modes without a verdict of their own inherit this one: their findings too.
      const family = [pattern, ...(pattern.kind === 'rule' ? await repo.children(tx, pattern.id) : [])];
      const findings = await repo.findingsOfPatterns(tx, family.map((p) => p.id));
      await this.writes.rollUp(tx, await this.writes.resuppress(tx, findings));
      const ctx = (await this.writes.contexts(tx, [pattern])).get(pattern.id)!;
      const after = await repo.findingsOfPatterns(tx, [pattern.id]);
      const state = stateOf(ctx, after.map((f) => ({ procedure_id: f.procedure_id, rule_id: f.rule_id, n: 1 })));
      const view: VerdictGivenView = {
        pattern_id: pattern.id,
        ...verdictView({ ...given, inherited: false })!,
        suppressed_count: after.filter((f) => f.suppressed).length,
        ...state,
        suggestion: null,
      };
      // suggest: true queues a suggestion once this transaction is committed (ReviewSop.giveVerdict).
      return view;
    });
  }

  /** POST /findings/{id}/override: kept by session and rule, so it outlives a re-check of the session. */
  async override(workspace: string, findingId: string, raw: unknown): Promise<OverrideView> {
    const input = overrideInput(raw);
    const repo = this.writes.repo;
    return this.db.transaction(async (tx) => {
      await repo.lockWorkspace(tx, workspace);
      const f = await repo.finding(tx, workspace, findingId);
      if (!f) throw new SopError(404, 'not_found', `no finding ${findingId} in workspace ${workspace}`);
      const o = await repo.saveOverride(tx, workspace, { session_id: f.session_id, procedure_id: f.procedure_id, rule_id: f.rule_id, correct: input.correct, note: input.note ?? null, reviewer: input.reviewer ?? null });
      await this.writes.rollUp(tx, await this.writes.resuppress(tx, [f]));
      const now = (await repo.finding(tx, workspace, findingId))!;
      const results = await resultsOf(tx, f.session_id, f.procedure_id);
      return { finding_id: f.id, ...o, suppressed: now.suppressed, ...results };
    });
  }
}

async function resultsOf(q: Queryable, sessionId: string, procedureId: string): Promise<{ check_result: OverrideView['check_result']; session_result: OverrideView['session_result'] }> {
  const res = await q.query<{ check_result: OverrideView['check_result']; session_result: OverrideView['session_result'] }>(
    'SELECT c.result AS check_result, s.result AS session_result FROM sop_sessions s LEFT JOIN sop_checks c ON c.session_id = s.id AND c.procedure_id = $2 WHERE s.id = $1',
    [sessionId, procedureId],
  );
  return res.rows[0] ?? { check_result: null, session_result: null };
}

function object(raw: unknown, fields: readonly string[]): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new SopError(400, 'invalid_body', 'the body must be a JSON object');
  const b = raw as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !fields.includes(k));
  if (unknown.length) throw new SopError(400, 'invalid_body', `unknown field ${unknown.join(', ')} in the body; it takes ${fields.join(', ')}`);
  return b;
}

function optionalText(b: Record<string, unknown>, name: string): string | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new SopError(400, 'invalid_body', `${name} must be a string`);
  if (v.length > MAX_TEXT) throw new SopError(400, 'invalid_body', `${name} is longer than ${MAX_TEXT} characters`);
  return v;
}

export function verdictInput(raw: unknown): VerdictInput {
  const b = object(raw, ['verdict', 'note', 'reviewer', 'suggest']);
  if (!isVerdict(b.verdict)) throw new SopError(400, 'invalid_body', `verdict must be one of ${VERDICTS.join(', ')}`);
  if (b.suggest !== undefined && b.suggest !== null && typeof b.suggest !== 'boolean') throw new SopError(400, 'invalid_body', 'suggest must be true or false');
  return { verdict: b.verdict, note: optionalText(b, 'note'), reviewer: optionalText(b, 'reviewer'), suggest: b.suggest === true };
}

export function overrideInput(raw: unknown): OverrideInput {
  const b = object(raw, ['correct', 'note', 'reviewer']);
  if (typeof b.correct !== 'boolean') throw new SopError(400, 'invalid_body', 'correct must be true (the checker got this finding right) or false (it did not)');
  return { correct: b.correct, note: optionalText(b, 'note'), reviewer: optionalText(b, 'reviewer') };
}
