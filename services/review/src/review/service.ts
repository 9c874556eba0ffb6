import type { Db, Jobs } from '@neatroots/ports';
import type { DecisionSettings, RuleResult } from '@neatroots/sop';
import { SopError, type ReviewSopQueries, type RuleLineageQueries, type SessionView } from '@neatroots/store';
import { RuleLineage } from '../lineage/service';
import type { GitHubConnections } from '../github/connections';
import { SuggestionService } from '../suggestions/service';
import { SopWorkspaces } from '../sop/workspaces';
import { Calibration } from '../calibration/service';
import type { SessionReviewHooks, SopSessions } from '../sop/sessions';
import { PATTERNS_QUEUE, PatternAssigner, type PatternsJob } from './assign';
import { compareReleases } from './compare';
import { insights } from './insights';
import { PatternNamer, type GatewayOf } from './namer';
import { getPattern, listPatterns, regression } from './patterns';
import { reviewQueue } from './queue';
import { RECLUSTER_QUEUE, RECLUSTER_WAIT_MS, Reclusterer, reclusterInput, type ReclusterJob, type ReclusterResult } from './recluster';
import { waitedFor } from './still-running';
import { Verdicts } from './verdicts';
import { findingKey, ReviewWrites } from './writes';

export interface ReviewSopOptions {
  db: Db;
  jobs: Jobs;
  /** The sessions to follow: told when a check is saved, and what their GET shows is filled in. */
  sessions?: SopSessions;
  /** The question service's decisions, for naming patterns with the reasoning model (none: rule-text names). */
  gateway?: GatewayOf;
  /** SOPOPS_DECISIONS: the bands calibration widens (default DEFAULT_DECISIONS). */
  decisions?: DecisionSettings;
  /** The rule lineage endpoints (services/review/src/lineage), served with the rest. */
  lineage?: RuleLineageQueries;
  /** When the daily sopops_recluster_daily job runs (SOPOPS_RECLUSTER_CRON, default 0 6 * * *). */
  reclusterCron?: string;
  /** Where an applied suggestion's draft is saved (default: this database's head). */
  workspaces?: SopWorkspaces;
  /** Workspaces' GitHub connections: applied suggestions open pull requests (none: drafts only). */
  github?: GitHubConnections | null;
  /** SOPOPS_PR_STATUS_CRON: when open pull requests are looked at (null: not scheduled). */
  prStatusCron?: string | null;
  /** How long POST /patterns/recluster waits for its job (default RECLUSTER_WAIT_MS, 10 minutes). */
  reclusterWaitMs?: number;
  /** Where a stop says which GitHub calls of suggestions it cut short. */
  log?: { warn(msg: string): void };
  /** How long a stop waits for the GitHub calls of suggestions running in the background (default 5 s). */
  stopWaitMs?: number;
}

/**
 * The review side of sopops in the review service: rule patterns (the sopops_patterns job
 * assigns each checked session's findings, one run at a time per workspace), verdicts,
 * overrides, suppression and the roll-up, the review queue, the patterns endpoints and
 * Insights. `queries` is what the api calls (in-process, or over gRPC distributed).
 */
export class ReviewSop implements SessionReviewHooks {
  readonly queries: ReviewSopQueries;
  readonly assigner: PatternAssigner;
  readonly namer: PatternNamer;
  readonly calibration: Calibration;
  readonly reclusterer: Reclusterer;
  readonly suggestions: SuggestionService;
  private readonly writes = new ReviewWrites();
  private readonly verdicts: Verdicts;

  constructor(private readonly opts: ReviewSopOptions) {
    const { db } = opts;
    this.namer = new PatternNamer(db, opts.gateway ?? (async () => null), this.writes.repo);
    this.assigner = new PatternAssigner(db, this.writes, this.namer);
    this.verdicts = new Verdicts(db, this.writes);
    this.calibration = new Calibration({ db, jobs: opts.jobs, decisions: opts.decisions });
    this.reclusterer = new Reclusterer(db, this.writes, opts.gateway ?? (async () => null), this.assigner, this.namer);
    const w = this.writes;
    this.suggestions = new SuggestionService(
      { db, jobs: opts.jobs, gateway: opts.gateway, workspaces: opts.workspaces ?? new SopWorkspaces(db), github: opts.github, prStatusCron: opts.prStatusCron, log: opts.log, stopWaitMs: opts.stopWaitMs },
      this.writes,
    );
    this.queries = this.suggestions.around({
      reviewQueue: (ws, q) => reviewQueue(db, w, ws, q),
      patterns: (ws, q) => listPatterns(db, w, ws, q),
      pattern: (ws, id, q) => getPattern(db, w, ws, id, q),
      giveVerdict: (ws, id, input) => this.verdicts.give(ws, id, input),
      overrideFinding: (ws, id, input) => this.verdicts.override(ws, id, input),
      regression: (ws, id) => regression(db, w, ws, id),
      insights: (ws, q) => insights(db, w, ws, q),
      compareReleases: (ws, q) => compareReleases(db, w, ws, q),
      renamePatterns: async (ws, input) => this.namer.rename(ws, renameInput(input)),
      calibrate: (ws, input) => this.calibration.calibrate(ws, input),
      ...(opts.lineage ?? new RuleLineage(db, this.writes).queries),
      // Through the job, so it is one run at a time per workspace however many replicas serve.
      recluster: async (ws, input) => {
        const filter = reclusterInput(input);
        await this.reclusterer.checkFilter(ws, filter);
        const job: ReclusterJob = { workspace: ws, ...filter, by: 'request' };
        return waitedFor(`the recluster of ${ws}`, opts.reclusterWaitMs ?? RECLUSTER_WAIT_MS, 'clustered_at on GET /patterns says when it is done', (timeoutMs) =>
          opts.jobs.run<ReclusterJob, ReclusterResult>(RECLUSTER_QUEUE, job, { attempts: 1, timeoutMs }),
        );
      },
    });
  }

  /** Registers the sopops_patterns handler, plugs into the sessions, and queues what a stop left unassigned. */
  async start(): Promise<void> {
    await this.reclusterer.start(this.opts.jobs, this.opts.reclusterCron);
    await this.suggestions.start();
    await this.opts.jobs.work<PatternsJob>(PATTERNS_QUEUE, (job) => this.assignFindings(job.workspace), { serializeBy: (job) => job.workspace });
    this.opts.sessions?.useReview(this);
    await this.calibration.start();
    this.opts.sessions?.useCalibration(this.calibration);
    for (const ws of await this.assigner.pending()) await this.enqueue(ws);
  }

  /** Before the jobs and the database close: what suggestions left running on GitHub, waited for (bounded). */
  close(): Promise<void> {
    return this.suggestions.close();
  }

  /** After a session's check is saved: assign its findings (the job takes every unassigned one of the workspace). */
  async onChecked(workspace: string): Promise<void> {
    await this.enqueue(workspace);
  }

  /** Each rule's pattern_id, suppressed and override, from the findings and overrides tables (the checks' stored body is the checker's). */
  async overlay(_workspace: string, view: SessionView): Promise<SessionView> {
    const [findings, overrides] = await Promise.all([this.writes.repo.findingsOfSession(this.opts.db, view.id), this.writes.repo.overridesOfSession(this.opts.db, view.id)]);
    const f = new Map(findings.map((x) => [findingKey(x.session_id, x.procedure_id, x.rule_id), x]));
    const o = new Map(overrides.map((x) => [findingKey(x.session_id, x.procedure_id, x.rule_id), x]));
    return {
      ...view,
      checks: view.checks.map((c) => ({
        ...c,
        rules: c.rules.map((r): RuleResult => {
          const k = findingKey(view.id, c.procedure_id, r.rule_id);
          const finding = r.finding ? f.get(k) : undefined;
          const override = o.get(k);
          return {
            ...r,
            pattern_id: finding?.pattern_id ?? null,
            suppressed: finding?.suppressed ?? false,
            override: override ? ({ correct: override.correct, note: override.note, reviewer: override.reviewer } as RuleResult['override']) : null,
          };
        }),
      })),
    };
  }

  /** The sopops_patterns job: findings into rule patterns, then into failure modes; a due recluster queued after. */
  private async assignFindings(workspace: string): Promise<number> {
    const n = (await this.assigner.assign(workspace)) + (await this.reclusterer.modes.assign(workspace));
    const gateway = await (this.opts.gateway?.() ?? null);
    const models = gateway ? await gateway.decisionModels() : null;
    // Without a reasoning model there is nothing to split or group: nothing is queued.
    const jobId = models?.reasoning ? await this.reclusterer.dueJobId(workspace) : null;
    if (jobId) await this.opts.jobs.add<ReclusterJob>(RECLUSTER_QUEUE, { workspace, by: 'due' }, { jobId, attempts: 3, backoffMs: 5000 });
    return n;
  }

  private async enqueue(workspace: string): Promise<void> {
    // Coalesced per workspace: a check that comes while the workspace's job waits shares it
    // (the job reads every unassigned finding when its handler begins, these included); one
    // that comes once it has begun queues the next. So a backlog of checks runs a handful of
    // jobs, not one each, and a finding saved after a job read the unassigned ones (a re-check
    // included) still has a job to come. No job id: a finished job never blocks a later one.
    await this.opts.jobs.add<PatternsJob>(PATTERNS_QUEUE, { workspace }, { coalesce: `patterns.${workspace}`, attempts: 5, backoffMs: 1000 });
  }
}

/** The rename body, {all?}: anything else is refused by name. */
function renameInput(input: unknown): { all: boolean } {
  const o = (input ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) throw new SopError(400, 'invalid_body', 'the body must be a JSON object: {"all": true}');
  const extra = Object.keys(o).filter((k) => k !== 'all');
  if (extra.length) throw new SopError(400, 'invalid_body', `unknown field ${JSON.stringify(extra[0])}: the body is {"all"?: boolean}`);
  if (o.all !== undefined && typeof o.all !== 'boolean') throw new SopError(400, 'invalid_body', `"all" must be true or false, got ${JSON.stringify(o.all)}`);
  return { all: o.all === true };
}
