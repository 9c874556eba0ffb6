import type { Queryable } from '@neatroots/ports';
import type { AgreementStore, ClassifierStore, PlanStore, ResultSink } from '@neatroots/questions';
import { ChecksRepo, FindingsRepo, ProjectsRepo, QuestionsRepo, type DbCheckInput, type DbCheckRecord } from '@neatroots/store';

/**
 * What the rule engine and the question service keep in review's database. Review owns
 * Postgres: in the embedded deployment they call this in-process, in the distributed one over
 * gRPC (neatroots.v1.ReviewData, ReviewDataClient), and neither needs a database address.
 */
export interface ReviewData {
  /** The checks quiet in a project (dismissed 3 times there). */
  quietChecks(project: string): Promise<string[]>;
  /** Steering switched on for the project in the database. */
  steering(project: string): Promise<boolean>;
  /** The database checks (the fourth check source), oldest first, with who wrote each. */
  checks(): Promise<{ id: string; yaml: string; origin: string }[]>;
  /** A project's database checks as stored (the authoring API lists, reads and guards them). */
  checkRecords(project: string): Promise<DbCheckRecord[]>;
  /** Stores a check (the planner's, or one saved through the authoring API or MCP). */
  putCheck(c: DbCheckInput): Promise<void>;
  /** Deletes a project's database check; false when it has none with this id. */
  deleteCheck(project: string, id: string): Promise<boolean>;
  plans: PlanStore;
  classifier: ClassifierStore;
  agreement: Required<AgreementStore>;
  results: ResultSink;
}

export function createReviewData(db: Queryable): ReviewData {
  const findings = new FindingsRepo(db);
  const projects = new ProjectsRepo(db);
  const checks = new ChecksRepo(db);
  const questions = new QuestionsRepo(db);
  return {
    quietChecks: (project) => findings.quietChecks(project),
    steering: (project) => projects.steering(project),
    checks: async () => (await checks.list()).map((c) => ({ id: c.id, yaml: c.yaml, origin: c.origin })),
    // Only the project's own: list() would add the checks of no project.
    checkRecords: async (project) => (await checks.list({ project })).filter((c) => c.project === project),
    putCheck: async (c) => void (await checks.put(c)),
    deleteCheck: (project, id) => checks.delete(project, id),
    plans: { get: (p, w) => questions.get(p, w), put: (plan) => questions.put(plan) },
    classifier: { load: (keys) => questions.loadModels(keys), save: (models) => questions.save(models) },
    agreement: { load: (keys) => questions.loadAgreement(keys), save: (r) => questions.saveAgreement(r), list: () => questions.listAgreement() },
    results: { record: (r) => questions.record(r), handed: (t) => questions.handed(t) },
  };
}
