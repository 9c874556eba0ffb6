/**
 * Calibration as the api calls it (POST /v1/workspaces/{ws}/calibrate): in-process in the
 * embedded default, over gRPC distributed; the fit itself runs as the sopops_calibrate job.
 * Refusals of the request are SopError (400); a procedure or question that cannot be fitted
 * is answered, with `skipped` saying why.
 */
export interface CalibrationQueries {
  calibrate(workspace: string, input: CalibrateInput): Promise<CalibrationView>;
}

export interface CalibrateInput {
  /** One procedure (default: every procedure of the live release, and any other with labels). */
  procedure?: string;
  /** Fit and answer, but store nothing. */
  dry_run?: boolean;
}

export type CalibrationRefusalCode = 'too_few_labeled_sessions' | 'too_few_failures' | 'not_in_release' | 'too_alike' | 'held_out';

export interface CalibrationRefusal {
  code: CalibrationRefusalCode;
  message: string;
  have: number;
  need: number;
}

/** [no, yes, decide], as in SOPOPS_DECISIONS. */
export type BandView = [number, number, number];

export interface CalibratedRuleView {
  rule_id: string;
  lineage_id: string;
  kind: 'step' | 'never' | 'warning';
  index: number;
  /** The rule as it reads now (the live release's wording). */
  text: string;
  /** The question fitted: step, never, responded (a warning sign's action), or warning (a sign without one). */
  field: string;
  before: BandView;
  after: BandView;
  skipped: CalibrationRefusal | null;
}

export interface CalibratedProcedureView {
  procedure_id: string;
  labels: number;
  negative_labels: number;
  /** The fitted bands were stored (not a dry run, and not refused). */
  saved: boolean;
  skipped: CalibrationRefusal | null;
  score_before: number | null;
  score: number | null;
  rules: CalibratedRuleView[];
}

export interface CalibrationView {
  workspace: string;
  dry_run: boolean;
  procedures: CalibratedProcedureView[];
}
