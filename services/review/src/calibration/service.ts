import type { Db, Jobs } from '@neatroots/ports';
import {
  calibrateProcedure,
  fieldOfFinding,
  labelOf,
  Lineage,
  lineageIdOf,
  verdictCovers,
  type Band,
  type CalibrationLabel,
  type CalibrationRule,
  type ProcedureFit,
} from '@neatroots/review-domain';
import { DEFAULT_DECISIONS, questionWording, QuestionBands, type BandKind, type DecisionSettings, type Lock, type LockProcedure } from '@neatroots/sop';
import {
  CalibrationRepo,
  LineageRepo,
  wordingSince,
  WorkspaceRepo,
  type CalibrateInput,
  type CalibratedProcedureView,
  type CalibrationQueries,
  type CalibrationView,
  type LabeledFindingRow,
  type StoredBand,
} from '@neatroots/store';
import { waitedFor } from '../review/still-running';
import { calibrateInput } from './input';

/** The BullMQ queue (the seed's Hatchet workflow) that fits a workspace's bands; the api waits for it. */
export const CALIBRATE_QUEUE = 'sopops_calibrate';

export interface CalibrateJob {
  workspace: string;
  procedure: string | null;
  dry_run: boolean;
}

export interface CalibrationOptions {
  db: Db;
  jobs: Jobs;
  /** SOPOPS_DECISIONS: the bands a question is read with when nothing was fitted for it. */
  decisions?: DecisionSettings;
  /** How long the request waits for the job (default 25 s, inside the api's gRPC deadline of 30 s). */
  timeoutMs?: number;
  /** How long a process reuses a workspace's fitted bands for its checks (default 5 s). */
  bandsTtlMs?: number;
}

/**
 * Calibration (POST /calibrate, sopops calibrate): the request validates the body and waits
 * for the sopops_calibrate job (BullMQ distributed, in this process embedded), which reads the
 * labels from the database alone, fits each procedure of the live release (libs/review's
 * calibrateProcedure) and, unless a dry run, replaces the procedure's stored bands. Checks read
 * the stored bands through bandsOf (reused for a few seconds per workspace: a check costs no
 * extra statement, and a new fit reaches every replica's checks within that time).
 */
export class Calibration implements CalibrationQueries {
  private readonly repo = new CalibrationRepo();
  private readonly lineage = new LineageRepo();
  private readonly decisions: DecisionSettings;
  private readonly cache = new Map<string, { at: number; bands: Promise<QuestionBands> }>();

  constructor(private readonly opts: CalibrationOptions) {
    this.decisions = opts.decisions ?? DEFAULT_DECISIONS;
  }

  /** Registers the job's handler: one fit at a time per workspace, in any process. */
  async start(): Promise<void> {
    await this.opts.jobs.work<CalibrateJob, CalibrationView>(CALIBRATE_QUEUE, (job) => this.run(job), { serializeBy: (job) => job.workspace });
  }

  /** POST /v1/workspaces/{ws}/calibrate: the fit, run as the job and waited for. */
  async calibrate(workspace: string, input: CalibrateInput): Promise<CalibrationView> {
    const job: CalibrateJob = { workspace, ...calibrateInput(input) };
    // One attempt: a fit that failed is answered as failed, not run again behind the caller's back.
    return waitedFor(`the calibration of ${workspace}`, this.opts.timeoutMs ?? 25_000, job.dry_run ? 'it is a dry run: nothing is stored' : 'its bands are stored when it is done', (timeoutMs) =>
      this.opts.jobs.run<CalibrateJob, CalibrationView>(CALIBRATE_QUEUE, job, { attempts: 1, timeoutMs }),
    );
  }

  /** The workspace's fitted bands, for the checker. */
  bandsOf(workspace: string): Promise<QuestionBands> {
    const hit = this.cache.get(workspace);
    if (hit && Date.now() - hit.at < (this.opts.bandsTtlMs ?? 5_000)) return hit.bands;
    const bands = this.repo.bands(this.opts.db, workspace).then((rows) => new QuestionBands(rows.map((r) => ({ ...r, field: r.field as BandKind }))));
    this.cache.set(workspace, { at: Date.now(), bands });
    bands.catch(() => this.cache.delete(workspace));
    return bands;
  }

  /** The job: fit, store unless a dry run, answer the REST body. */
  async run(job: CalibrateJob): Promise<CalibrationView> {
    const { db } = this.opts;
    const [live, rows, stored, lineageRows, returns] = await Promise.all([
      new WorkspaceRepo(db).release<Lock>(job.workspace, 'live'),
      this.repo.labeledFindings(db, job.workspace, job.procedure),
      this.repo.bands(db, job.workspace),
      // which rule each reworded rule replaced: labels on every wording count for the live one
      this.lineage.rows(db, job.workspace),
      // wordings that came back (A, B, then A again) are dated from their return
      this.lineage.returns(db, job.workspace),
    ]);
    const lineage = new Lineage(lineageRows);
    // when each earlier wording came in: a verdict older than a finding's wording does not label it
    const since = wordingSince(lineageRows, returns);
    const bands = new QuestionBands(stored.map((r) => ({ ...r, field: r.field as BandKind })));
    const inRelease = new Map((live?.lock.procedures ?? []).map((p) => [p.procedure_id, p]));
    const ids = job.procedure ? [job.procedure] : [...new Set([...inRelease.keys(), ...rows.map((r) => r.procedure_id)])].sort();

    const fits = ids.map((id) => {
      const procedure = inRelease.get(id) ?? null;
      const labeled = labelsOf(rows.filter((r) => r.procedure_id === id), lineage, since);
      const rules: CalibrationRule[] | null = procedure
        ? procedure.rules.map((r) => ({ rule_id: r.rule_id, lineage_id: lineageIdOf(id, r.rule_id, lineage), kind: r.kind, index: r.index, text: r.text, action: r.action }))
        : null;
      const fit = calibrateProcedure({
        procedure_id: id,
        rules,
        release_number: live?.number ?? null,
        labeled_sessions: labeled.sessions,
        labels: labeled.labels,
        bandOf: (rule, field) => bands.bandFor({ kind: field, procedure: procedure!, rule: procedure!.rules.find((r) => r.rule_id === rule.rule_id)! }, this.decisions) as Band,
      });
      return { fit, procedure, labels: labeled.labels };
    });

    const save = fits.filter((f) => !job.dry_run && !f.fit.skipped && f.procedure);
    if (save.length) {
      await db.transaction(async (tx) => {
        for (const f of save) await this.repo.replaceProcedureBands(tx, job.workspace, f.fit.procedure_id, this.toStore(f.fit, f.procedure!, f.labels, live!.id));
      });
      this.cache.delete(job.workspace);
    }
    return { workspace: job.workspace, dry_run: job.dry_run, procedures: fits.map((f) => view(f.fit, save.includes(f))) };
  }

  /** The questions a fit leaves wider than the settings' band: the rows kept (the rest read the settings'). */
  private toStore(fit: ProcedureFit, procedure: LockProcedure, labels: readonly CalibrationLabel[], releaseId: string): StoredBand[] {
    return fit.rules.flatMap((r) => {
      if (r.field === 'warning') return [];
      const s = this.decisions.bands[r.field];
      if (r.after[0] >= s[0] && r.after[1] <= s[1]) return [];
      const rule = procedure.rules.find((x) => x.rule_id === r.rule_id)!;
      const mine = labels.filter((l) => l.lineage_id === r.lineage_id && l.field === r.field);
      return [{
        procedure_id: fit.procedure_id, rule_id: r.rule_id, field: r.field, wording: questionWording(r.field, rule), band: [...r.after],
        lineage_id: r.lineage_id, release_id: releaseId, labels: mine.length, negative_labels: mine.filter((l) => !l.correct).length,
      }];
    });
  }
}

/**
 * A procedure's labels from its reviewed findings: labeled sessions are those with any
 * labeled finding; a label is used when its finding came from a question's decision whose
 * probability the check kept. A finding not yet in a pattern is keyed by its rule's lineage.
 */
export function labelsOf(rows: readonly LabeledFindingRow[], lineage: Lineage, since: (procedureId: string, ruleId: string) => string | null = () => null): { sessions: number; labels: CalibrationLabel[] } {
  const sessions = new Set<string>();
  const labels: CalibrationLabel[] = [];
  for (const r of rows) {
    // its most specific pattern's verdict, else (a failure mode without one) its rule pattern's
    const v = r.own_verdict ?? r.rule_verdict;
    const correct = labelOf({
      verdict: v?.verdict ?? null,
      verdictCovers: v !== null && verdictCovers(v.created_at, { rule_id: r.rule_id, wording_since: since(r.procedure_id, r.rule_id) }, { rule_id: r.wording_rule_id ?? r.rule_id, since: r.reworded_at }),
      override: r.override,
    });
    if (correct === null) continue;
    sessions.add(r.session_id);
    const field = fieldOfFinding(r.status);
    const decision = field ? r.decisions.find((d) => d.field === field) : undefined;
    if (!field || !decision) continue;
    labels.push({ session_id: r.session_id, lineage_id: r.lineage_id ?? lineageIdOf(r.procedure_id, r.rule_id, lineage), field, p: decision.p, correct });
  }
  return { sessions: sessions.size, labels };
}

function view(f: ProcedureFit, saved: boolean): CalibratedProcedureView {
  return {
    procedure_id: f.procedure_id,
    labels: f.labels,
    negative_labels: f.negative_labels,
    saved,
    skipped: f.skipped,
    score_before: f.score_before,
    score: f.score,
    rules: f.rules.map((r) => ({ rule_id: r.rule_id, lineage_id: r.lineage_id, kind: r.kind, index: r.index, text: r.text, field: r.field, before: [...r.before], after: [...r.after], skipped: r.skipped })),
  };
}
