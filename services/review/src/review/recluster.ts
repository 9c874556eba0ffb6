import { createHash } from 'node:crypto';
import type { Db, Jobs } from '@neatroots/ports';
import { reclusterDue, SPLIT_AT_FINDINGS } from '@neatroots/review-domain';
import { ClustersRepo, SopError, type PatternRecord, type RuleClusterRow } from '@neatroots/store';
import type { PatternAssigner } from './assign';
import { FailureModeAssigner } from './modes';
import type { GatewayOf, PatternNamer } from './namer';
import { RuleSplitter } from './split';
import { ThemeGrouper } from './themes';
import type { ReviewWrites } from './writes';

/** The job that reclusters a workspace's due rules (the seed's sopops_recluster): one run at a time per workspace. */
export const RECLUSTER_QUEUE = 'sopops_recluster';
/** The daily repeatable job (SOPOPS_RECLUSTER_CRON) and its schedule's name. */
export const RECLUSTER_DAILY_QUEUE = 'sopops_recluster_daily';
export const RECLUSTER_DAILY_SCHEDULE = 'sopops_recluster_daily';
export const DEFAULT_RECLUSTER_CRON = '0 6 * * *';
/** How long POST /patterns/recluster waits for its job (it calls the models). */
export const RECLUSTER_WAIT_MS = 10 * 60_000;

export interface ReclusterJob {
  workspace: string;
  procedure?: string;
  /** A rule id: its lineage. */
  rule?: string;
  /** Every rule with 8 or more findings, due or not. */
  force?: boolean;
  /**
   * Who asked: `request` (the endpoint, the CLI) assigns, reclusters and regroups every
   * procedure's themes; `due` (after assignment) reclusters what is due and groups the themes
   * of procedures with a rule pattern in none; `daily` reclusters every rule with 8 or more
   * findings and a new one since its last clustering, and regroups every procedure.
   */
  by?: 'request' | 'due' | 'daily';
}

export interface ReclusterResult {
  /** Findings put in a pattern, or moved from a split rule to one of its failure modes. */
  assigned: number;
  /** Rules split into failure modes (again). */
  reclustered: number;
  /** Procedures whose rule patterns were grouped into themes. */
  themed: number;
  /** What could not be done and why (no reasoning model, a model error), or null. */
  reason: string | null;
}

/** The recluster body, {procedure?, rule?, force?}: anything else is refused by name. */
export function reclusterInput(input: unknown): Pick<ReclusterJob, 'procedure' | 'rule' | 'force'> {
  const o = (input ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) throw new SopError(400, 'invalid_body', 'the body must be a JSON object: {"procedure"?: "...", "rule"?: "...", "force"?: true}');
  const extra = Object.keys(o).filter((k) => !['procedure', 'rule', 'force'].includes(k));
  if (extra.length) throw new SopError(400, 'invalid_body', `unknown field ${JSON.stringify(extra[0])}: the body is {"procedure"?: string, "rule"?: string, "force"?: boolean}`);
  for (const k of ['procedure', 'rule'] as const) {
    if (o[k] !== undefined && (typeof o[k] !== 'string' || !(o[k] as string).trim())) throw new SopError(400, 'invalid_body', `"${k}" must be a non-empty string, got ${JSON.stringify(o[k])}`);
  }
  if (o.force !== undefined && typeof o.force !== 'boolean') throw new SopError(400, 'invalid_body', `"force" must be true or false, got ${JSON.stringify(o.force)}`);
  return { ...(o.procedure ? { procedure: o.procedure as string } : {}), ...(o.rule ? { rule: o.rule as string } : {}), ...(o.force ? { force: true } : {}) };
}

/**
 * Failure modes and themes made (again): assign what waits, split the rules that are due
 * (reclusterDue, or every rule with 8+ findings with force), regroup themes. Runs as the
 * sopops_recluster job (BullMQ distributed, inline embedded), one run at a time per workspace,
 * so two splits of one rule never race; the endpoint waits for it. Without a reasoning model
 * nothing is split (a rule pattern stays whole) and the result says so.
 */
export class Reclusterer {
  readonly modes: FailureModeAssigner;
  private readonly splitter: RuleSplitter;
  private readonly themes: ThemeGrouper;

  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites,
    private readonly gateway: GatewayOf,
    private readonly assigner: PatternAssigner,
    private readonly namer: PatternNamer,
    private readonly clusters: ClustersRepo = new ClustersRepo(),
  ) {
    this.modes = new FailureModeAssigner(db, writes, gateway, clusters);
    this.splitter = new RuleSplitter(db, writes, clusters);
    this.themes = new ThemeGrouper(db, writes, clusters);
  }

  /** Registers the sopops_recluster handler and the daily schedule (once, however many replicas start). */
  async start(jobs: Jobs, cron: string = DEFAULT_RECLUSTER_CRON): Promise<void> {
    await jobs.schedule(RECLUSTER_DAILY_QUEUE, RECLUSTER_DAILY_SCHEDULE, cron, {});
    await jobs.work<ReclusterJob, ReclusterResult>(RECLUSTER_QUEUE, (job) => this.run(job), { serializeBy: (job) => job.workspace });
    // The daily pass queues one recluster per workspace, so it too runs one at a time per workspace.
    await jobs.work(RECLUSTER_DAILY_QUEUE, async () => {
      const workspaces = await this.clusters.workspacesWithPatterns(this.db);
      for (const workspace of workspaces) await jobs.add<ReclusterJob>(RECLUSTER_QUEUE, { workspace, by: 'daily' }, { attempts: 3, backoffMs: 5000 });
      return { queued: workspaces.length };
    });
  }

  /**
   * What a `due` run would do (rules due for a split, procedures to group), as a job id, or null
   * when nothing: the checks of a busy workspace queue one run per state, not one per check, and
   * a run that failed (a model error) is tried again once the state changes (a new finding).
   */
  async dueJobId(workspace: string): Promise<string | null> {
    const due = (await this.clusters.ruleFacts(this.db, workspace)).filter((f) => this.due(f, false, 'due'));
    const ungrouped = await this.clusters.ungroupedProcedures(this.db, workspace);
    if (!due.length && !ungrouped.length) return null;
    const state = JSON.stringify([workspace, due.map((f) => [f.id, f.findings, f.new_since_clustering, f.in_other]), ungrouped]);
    return `recluster-${createHash('sha256').update(state).digest('base64url').slice(0, 32)}`;
  }

  /**
   * Refuses (404 not_in_release) a procedure or rule the workspace does not know (in none of
   * its releases, findings, patterns or lineage): the filter would match nothing and the
   * answer would read as a recluster done, a typo in a cron job unnoticed.
   */
  async checkFilter(workspace: string, filter: Pick<ReclusterJob, 'procedure' | 'rule'>): Promise<void> {
    const where = `in none of its releases, findings or patterns: nothing to recluster`;
    if (filter.procedure !== undefined && !(await this.clusters.knows(this.db, workspace, { procedure: filter.procedure }))) {
      throw new SopError(404, 'not_in_release', `no procedure ${filter.procedure} in workspace ${workspace}: it is ${where}`);
    }
    if (filter.rule !== undefined && !(await this.clusters.knows(this.db, workspace, filter))) {
      const of = filter.procedure !== undefined ? `procedure ${filter.procedure} of workspace ${workspace}` : `workspace ${workspace}`;
      throw new SopError(404, 'not_in_release', `no rule ${filter.rule} in ${of}: it is ${where}`);
    }
  }

  async run(job: ReclusterJob): Promise<ReclusterResult> {
    const { workspace } = job;
    const by = job.by ?? 'request';
    let assigned = by === 'due' ? 0 : await this.assigner.assign(workspace);
    assigned += await this.modes.assign(workspace);

    const facts = await this.clusters.ruleFacts(this.db, workspace, { procedure: job.procedure, lineage: job.rule });
    const due = facts.filter((f) => this.due(f, job.force === true, by));
    const patterns = await this.writes.repo.patternsOf(this.db, workspace);
    const procedures = this.themesToGroup(patterns, facts, by === 'due' ? await this.clusters.ungroupedProcedures(this.db, workspace) : [], job, by);

    const gateway = await this.gateway();
    const models = gateway ? await gateway.decisionModels() : null;
    if (!gateway || !models?.reasoning) {
      const what = [due.length ? `${due.length} rule${due.length === 1 ? '' : 's'} due for a split stay${due.length === 1 ? 's' : ''} whole` : '', procedures.length ? `themes were not grouped` : ''].filter(Boolean);
      return { assigned, reclustered: 0, themed: 0, reason: what.length ? `no reasoning model is configured: ${what.join(', and ')}` : null };
    }

    const reasons: string[] = [];
    let reclustered = 0;
    const byId = new Map(patterns.map((p) => [p.id, p]));
    for (const f of due) {
      const rule = byId.get(f.id) as PatternRecord;
      const r = await this.splitter.split(workspace, rule, gateway);
      if (r.ok) reclustered++;
      else reasons.push(`${rule.procedure_id} ${rule.lineage_id} was not split: ${r.reason}`);
    }
    // Findings that arrived during the splits wait on their rule: assign them now.
    if (reclustered) assigned += await this.modes.assign(workspace);
    // The next recluster names the rule patterns still named from their rule's text.
    await this.namer.rename(workspace).catch(() => undefined);

    let themed = 0;
    for (const procedure of procedures) {
      const r = await this.themes.group(workspace, procedure, gateway);
      if (r.ok) themed++;
      else reasons.push(`the themes of ${procedure} were not grouped: ${r.reason}`);
    }
    return { assigned, reclustered, themed, reason: reasons.length ? reasons.join('; ') : null };
  }

  private due(f: RuleClusterRow, force: boolean, by: NonNullable<ReclusterJob['by']>): boolean {
    if (force && f.findings >= SPLIT_AT_FINDINGS) return true;
    // Daily: every rule big enough to split that changed since its last clustering.
    if (by === 'daily' && f.findings >= SPLIT_AT_FINDINGS && (f.clustered_at === null || f.new_since_clustering > 0)) return true;
    return reclusterDue({ findings: f.findings, clustered: f.clustered_at !== null, new_since_clustering: f.new_since_clustering, in_other: f.in_other }) !== null;
  }

  /** The procedures whose themes this run groups (see ReclusterJob.by). */
  private themesToGroup(patterns: readonly PatternRecord[], facts: readonly RuleClusterRow[], ungrouped: string[], job: ReclusterJob, by: NonNullable<ReclusterJob['by']>): string[] {
    const active = patterns.filter((p) => p.kind === 'rule' && p.retired_at === null && (!job.procedure || p.procedure_id === job.procedure));
    if (by === 'due') return ungrouped;
    const touched = job.rule ? new Set(facts.map((f) => f.procedure_id)) : null;
    return [...new Set(active.map((p) => p.procedure_id))].filter((p) => !touched || touched.has(p));
  }
}
