import type { Db, Queryable } from '@neatroots/ports';
import {
  compareReleases,
  Lineage,
  LineageCycleError,
  linksFromChanges,
  rebuildLineageSteps,
  type LineageLink,
  type SuggestionEdit,
} from '@neatroots/review-domain';
import type { Lock } from '@neatroots/sop';
import {
  LineageRepo,
  SopError,
  type LineageRebuiltView,
  type LineageRelease,
  type LineageReturnRow,
  type LineageRow,
  type NewLineageReturnRow,
  type LinkRuleInput,
  type ReleaseRecord,
  type RuleLineageQueries,
  type RuleLineageQuery,
  type RuleLineageView,
} from '@neatroots/store';
import { ReviewWrites } from '../review/writes';
import { realign, type OnPatternsMerged } from './realign';

/**
 * The applied suggestions whose edit is in a release's files (a draft, or a pull request open
 * or merged): the rule of the release before that each edited. The suggestions service
 * supplies it; without it no link is a `suggestion` one. Runs in the publish's (or the
 * rebuild's) transaction: read through `q` only.
 */
export type SuggestionEditsOf = (q: Queryable, workspace: string, release: { id: string; number: number }) => Promise<SuggestionEdit[]>;

export interface RuleLineageOptions {
  suggestionEdits?: SuggestionEditsOf;
  onMerged?: OnPatternsMerged;
}

const toLink = (r: LineageRow): LineageLink => ({ procedure_id: r.procedure_id, rule_id: r.rule_id, previous_rule_id: r.previous_rule_id, how: r.how, similarity: r.similarity });
const key = (procedureId: string, ruleId: string) => `${procedureId}\0${ruleId}`;
/** A publish's link of a wording that came back, as its rule_lineage_returns row at that release. */
const toReturn = (l: LineageLink, releaseId: string): NewLineageReturnRow[] =>
  l.how === 'manual' ? [] : [{ procedure_id: l.procedure_id, rule_id: l.rule_id, previous_rule_id: l.previous_rule_id, how: l.how, similarity: l.similarity, release_id: releaseId }];

/** Each rule's first release (by number) and its text there, per procedure. */
function firstSeen(releases: readonly LineageRelease<Lock>[]): Map<string, { release_id: string; number: number; text: string }> {
  const out = new Map<string, { release_id: string; number: number; text: string }>();
  for (const r of releases) {
    for (const p of r.lock.procedures ?? []) {
      for (const rule of p.rules) if (!out.has(key(p.procedure_id, rule.rule_id))) out.set(key(p.procedure_id, rule.rule_id), { release_id: r.id, number: r.number, text: rule.text });
    }
  }
  return out;
}

/**
 * Rule lineage in the review service: the links a publish makes (in the publish's transaction),
 * the lineage endpoints (read, link by hand, unlink, rebuild) and, after each change, the rule
 * patterns moved to match (realign). Every change runs in one transaction under the
 * workspace's row lock, the lock pattern assignment takes too.
 */
export class RuleLineage {
  readonly repo = new LineageRepo();
  readonly queries: RuleLineageQueries;

  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites = new ReviewWrites(),
    private readonly opts: RuleLineageOptions = {},
  ) {
    this.queries = {
      // async: a refused body is a rejected promise, as over gRPC
      ruleLineage: async (ws, id, q) => this.get(ws, id, lineageQuery(q)),
      linkRule: async (ws, id, input) => this.link(ws, id, linkInput(input)),
      unlinkRule: async (ws, id, q) => this.unlink(ws, id, lineageQuery(q)),
      rebuildLineage: async (ws) => this.rebuild(ws),
    };
  }

  /** Workspaces published before lineage was stored get their links once (what a migration would do). */
  async start(): Promise<void> {
    for (const ws of await this.repo.workspacesToRebuild(this.db)) await this.rebuild(ws);
  }

  /**
   * At publish, inside its transaction: the live release's rules matched with the new
   * release's (suggestion, same position, best remaining pair), one row per rule new to its
   * procedure, never overwriting a row, and a step at this release for each wording that came
   * back (its row is kept); then the findings of rules that joined a lineage move.
   */
  async atPublish(tx: Queryable, workspace: string, release: ReleaseRecord<Lock>, previous: ReleaseRecord<Lock> | null): Promise<void> {
    const rows = await this.repo.rows(tx, workspace);
    const edits = (await this.opts.suggestionEdits?.(tx, workspace, { id: release.id, number: release.number })) ?? [];
    const proposed = linksFromChanges(compareReleases(previous?.lock.procedures ?? [], release.lock.procedures, edits));
    // A rule's row says the first release with it: one before this one, and the wording came back.
    const firstIn = new Map(rows.map((r) => [key(r.procedure_id, r.rule_id), r.release_number]));
    const earlier = (procedureId: string, ruleId: string) => (firstIn.get(key(procedureId, ruleId)) ?? Infinity) < release.number;
    const { lineage, added, returned } = new Lineage(rows.map(toLink)).withPublished(proposed, earlier);
    await this.repo.write(tx, workspace, added.map((l) => ({ ...l, release_id: release.id })), 'published');
    await this.repo.writeReturns(tx, workspace, returned.flatMap((l) => toReturn(l, release.id)));
    // A rule new to the release has no findings yet, so nothing moves, unless the wording ran
    // before (it was in an earlier release) or later wordings already point at it: only then
    // is the workspace's findings' placement worth reading.
    const linked = added.filter((l) => l.previous_rule_id !== null);
    const pointedAt = new Set(rows.map((r) => `${r.procedure_id}\0${r.previous_rule_id}`));
    if (linked.some((l) => pointedAt.has(`${l.procedure_id}\0${l.rule_id}`)) || (await this.repo.anyFindings(tx, workspace, linked))) {
      await realign(tx, workspace, lineage, await this.repo.rows(tx, workspace), { wholeMoves: true }, this.deps());
    }
  }

  async get(workspace: string, ruleId: string, q: RuleLineageQuery, on: Queryable = this.db): Promise<RuleLineageView> {
    const [rows, returns, releases] = await Promise.all([this.repo.rows(on, workspace), this.repo.returns(on, workspace), this.repo.releases<Lock>(on, workspace)]);
    const procedureId = this.procedureOf(workspace, ruleId, q.procedure, rows, releases, 'rule_id');
    return view(procedureId, ruleId, rows, returns, releases);
  }

  /** POST .../lineage: the rule replaced previous_rule_id (a manual row); 409 for a cycle. Patterns merge into the older one. */
  async link(workspace: string, ruleId: string, input: LinkRuleInput): Promise<RuleLineageView> {
    return this.change(workspace, async (tx, rows, releases) => {
      const procedureId = this.procedureOf(workspace, ruleId, input.procedure_id, rows, releases, 'rule_id');
      if (!known(procedureId, input.previous_rule_id, rows, releases)) {
        throw new SopError(404, 'not_found', `no rule ${input.previous_rule_id} in procedure ${procedureId} of workspace ${workspace} (previous_rule_id)`);
      }
      return this.manual(tx, workspace, procedureId, ruleId, input.previous_rule_id, rows, releases);
    });
  }

  /** DELETE .../lineage: the rule is a new rule (a manual row with no previous rule); its findings and its later wordings' get a pattern of their own. */
  async unlink(workspace: string, ruleId: string, q: RuleLineageQuery): Promise<RuleLineageView> {
    return this.change(workspace, async (tx, rows, releases) => {
      const procedureId = this.procedureOf(workspace, ruleId, q.procedure, rows, releases, 'rule_id');
      return this.manual(tx, workspace, procedureId, ruleId, null, rows, releases);
    });
  }

  /** POST .../rules/lineage/rebuild: every release against the one before it by number, manual rows kept; patterns moved to match. */
  async rebuild(workspace: string): Promise<LineageRebuiltView> {
    return this.db.transaction(async (tx) => {
      await this.writes.repo.lockWorkspace(tx, workspace);
      const rows = await this.repo.rows(tx, workspace);
      const releases = await this.repo.releases<Lock>(tx, workspace);
      const inputs = [];
      for (const r of releases) {
        const suggestions = (await this.opts.suggestionEdits?.(tx, workspace, { id: r.id, number: r.number })) ?? [];
        inputs.push({ procedures: r.lock.procedures ?? [], suggestions });
      }
      const manual = rows.filter((r) => r.how === 'manual');
      const { links, returns } = rebuildLineageSteps(inputs, manual.map(toLink));
      const first = firstSeen(releases);
      await this.repo.deleteComputed(tx, workspace);
      await this.repo.write(
        tx,
        workspace,
        links.filter((l) => l.how !== 'manual').map((l) => ({ ...l, release_id: first.get(key(l.procedure_id, l.rule_id))?.release_id ?? null })),
        'published',
      );
      await this.repo.writeReturns(tx, workspace, returns.flatMap((r) => toReturn(r.link, releases[r.release].id)));
      const after = await this.repo.rows(tx, workspace);
      await realign(tx, workspace, new Lineage(after.map(toLink)), after, { wholeMoves: true }, this.deps());
      const back = await this.repo.returns(tx, workspace);
      return { workspace, links: after.length + back.length, procedures: new Set([...after, ...back].map((r) => r.procedure_id)).size };
    });
  }

  private async manual(tx: Queryable, workspace: string, procedureId: string, ruleId: string, previousRuleId: string | null, rows: LineageRow[], releases: LineageRelease<Lock>[]): Promise<RuleLineageView> {
    let made: { lineage: Lineage; link: LineageLink };
    try {
      made = new Lineage(rows.map(toLink)).withManual(procedureId, ruleId, previousRuleId);
    } catch (e) {
      if (e instanceof LineageCycleError) throw new SopError(409, 'lineage_cycle', `${ruleId} cannot replace ${previousRuleId}: ${e.message}`);
      throw e;
    }
    const release = firstSeen(releases).get(key(procedureId, ruleId))?.release_id ?? null;
    await this.repo.write(tx, workspace, [{ ...made.link, release_id: release }], 'manual');
    const after = await this.repo.rows(tx, workspace);
    await realign(tx, workspace, made.lineage, after, { wholeMoves: previousRuleId !== null }, this.deps());
    return view(procedureId, ruleId, after, await this.repo.returns(tx, workspace), releases);
  }

  private change(workspace: string, fn: (tx: Queryable, rows: LineageRow[], releases: LineageRelease<Lock>[]) => Promise<RuleLineageView>): Promise<RuleLineageView> {
    return this.db.transaction(async (tx) => {
      await this.writes.repo.lockWorkspace(tx, workspace);
      return fn(tx, await this.repo.rows(tx, workspace), await this.repo.releases<Lock>(tx, workspace));
    });
  }

  /** The procedure a rule id is in: the one asked for, or the only one. */
  private procedureOf(workspace: string, ruleId: string, asked: string | undefined, rows: readonly LineageRow[], releases: readonly LineageRelease<Lock>[], what: string): string {
    const procedures = new Set<string>();
    for (const r of rows) if (r.rule_id === ruleId || r.previous_rule_id === ruleId) procedures.add(r.procedure_id);
    for (const rel of releases) for (const p of rel.lock.procedures ?? []) if (p.rules.some((r) => r.rule_id === ruleId)) procedures.add(p.procedure_id);
    if (asked !== undefined) {
      if (!procedures.has(asked)) throw new SopError(404, 'not_found', `no rule ${ruleId} in procedure ${asked} of workspace ${workspace}`);
      return asked;
    }
    if (procedures.size === 0) throw new SopError(404, 'not_found', `no rule ${ruleId} (${what}) in any release of workspace ${workspace}`);
    if (procedures.size > 1) {
      throw new SopError(400, 'ambiguous_rule', `rule ${ruleId} is in more than one procedure (${[...procedures].sort().join(', ')}): say which with procedure`);
    }
    return [...procedures][0];
  }

  private deps() {
    return { writes: this.writes, lineageRepo: this.repo, onMerged: this.opts.onMerged };
  }
}

function known(procedureId: string, ruleId: string, rows: readonly LineageRow[], releases: readonly LineageRelease<Lock>[]): boolean {
  if (rows.some((r) => r.procedure_id === procedureId && (r.rule_id === ruleId || r.previous_rule_id === ruleId))) return true;
  return releases.some((rel) => (rel.lock.procedures ?? []).some((p) => p.procedure_id === procedureId && p.rules.some((r) => r.rule_id === ruleId)));
}

/**
 * The rule's row, and every step of its lineage by release: each wording at the release it
 * first appeared in (its row), and again at each release that brought it back (its returns),
 * so the last step is the wording the newest release has.
 */
function view(procedureId: string, ruleId: string, rows: readonly LineageRow[], returns: readonly LineageReturnRow[], releases: readonly LineageRelease<Lock>[]): RuleLineageView {
  const mine = rows.filter((r) => r.procedure_id === procedureId);
  const lineage = new Lineage(mine.map(toLink));
  const lineageId = lineage.lineageId(procedureId, ruleId);
  const first = firstSeen(releases);
  const candidates = new Set<string>([ruleId, lineageId]);
  for (const r of mine) {
    candidates.add(r.rule_id);
    if (r.previous_rule_id) candidates.add(r.previous_rule_id);
  }
  const byRule = new Map(mine.map((r) => [r.rule_id, r]));
  const members = new Set([...candidates].filter((id) => lineage.lineageId(procedureId, id) === lineageId));
  const depth = (id: string) => lineage.chain(procedureId, id).length;
  const wordings = [...members].map((id) => {
    const row = byRule.get(id);
    const seen = first.get(key(procedureId, id));
    return {
      depth: depth(id),
      w: {
        rule_id: id,
        previous_rule_id: row?.previous_rule_id ?? null,
        how: row?.how ?? null,
        similarity: row?.similarity ?? null,
        release_id: row?.release_id ?? seen?.release_id ?? null,
        text: seen?.text ?? null,
        from_release: row?.release_number ?? seen?.number ?? null,
      },
    };
  });
  // The wording's returns: the same wording again, at the release that brought it back.
  const back = returns
    .filter((r) => r.procedure_id === procedureId && members.has(r.rule_id))
    .map((r) => ({
      depth: depth(r.rule_id),
      w: {
        rule_id: r.rule_id,
        previous_rule_id: r.previous_rule_id,
        how: r.how,
        similarity: r.similarity,
        release_id: r.release_id,
        text: first.get(key(procedureId, r.rule_id))?.text ?? null,
        from_release: r.release_number,
      },
    }));
  const steps = [...wordings, ...back].sort((a, b) => (a.w.from_release ?? Infinity) - (b.w.from_release ?? Infinity) || a.depth - b.depth || (a.w.rule_id < b.w.rule_id ? -1 : 1));
  const own = byRule.get(ruleId);
  return { procedure_id: procedureId, rule_id: ruleId, lineage_id: lineageId, previous_rule_id: own?.previous_rule_id ?? null, how: own?.how ?? null, rules: steps.map((x) => x.w) };
}

function plainObject(v: unknown, what: string): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new SopError(400, 'invalid_body', `the ${what} must be a JSON object`);
  return v as Record<string, unknown>;
}

function lineageQuery(q: unknown): RuleLineageQuery {
  const o = plainObject(q, 'query');
  const extra = Object.keys(o).filter((k) => k !== 'procedure');
  if (extra.length) throw new SopError(400, 'unknown_parameter', `unknown parameter ${JSON.stringify(extra[0])}: the one there is is procedure`);
  if (o.procedure !== undefined && (typeof o.procedure !== 'string' || o.procedure === '')) throw new SopError(400, 'invalid_query', 'procedure must be a procedure id');
  return o.procedure === undefined ? {} : { procedure: o.procedure as string };
}

function linkInput(input: unknown): LinkRuleInput {
  const o = plainObject(input, 'body');
  const extra = Object.keys(o).filter((k) => k !== 'previous_rule_id' && k !== 'procedure_id');
  if (extra.length) throw new SopError(400, 'invalid_body', `unknown field ${JSON.stringify(extra[0])}: the body is {"previous_rule_id": "...", "procedure_id"?: "..."}`);
  if (typeof o.previous_rule_id !== 'string' || o.previous_rule_id === '') throw new SopError(400, 'invalid_body', 'previous_rule_id must be the id of the rule this one replaced');
  if (o.procedure_id !== undefined && (typeof o.procedure_id !== 'string' || o.procedure_id === '')) throw new SopError(400, 'invalid_body', 'procedure_id must be a procedure id');
  return { previous_rule_id: o.previous_rule_id, ...(o.procedure_id === undefined ? {} : { procedure_id: o.procedure_id as string }) };
}
