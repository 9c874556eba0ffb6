import type { Queryable } from '@neatroots/ports';
import type {
  AgreementRecord,
  Answer,
  HandedTask,
  AgreementStore,
  ClassifierStore,
  Plan,
  PlanStore,
  QuestionResult,
  ResultSink,
  SavedModel,
} from '@neatroots/questions';
import { chunks, isoNonNull, json, num, text, tsParam, valuesList } from './sql';

/**
 * The question service's tables (migration 0002): the fast classifier's models, its agreement
 * with the LLM per question, the planner's plans, and the results of question checks. One
 * repository implements the ports @neatroots/questions declares for them (the agreement
 * store is `repo.agreement`: its load and save would clash with the classifier store's).
 */
/** Absent values as SQL NULL. */
type Columns<T> = { [K in keyof T]-?: Exclude<T[K], undefined> | null };

/**
 * A stored question result: the QuestionResult the processor records, its answer's fields as
 * columns (absent ones null) and its time as an ISO timestamp.
 */
export type QuestionResultRecord = Omit<QuestionResult, 'answer' | 'finding_id' | 'at_ms'> &
  Pick<Answer, 'status' | 'flagged'> &
  Columns<Pick<Answer, 'probability' | 'value' | 'label' | 'quote' | 'answered_by' | 'confidence' | 'reason'>> & {
    finding_id: string | null;
    at: string;
  };

type Row = Record<string, unknown>;

/** How long a done question task's row is kept: its hand-over may still come (recorded beside the rule engine's step). */
export const PENDING_DONE_KEPT_MS = 60 * 60_000;

/** How long a done question task waits for the finding its answer raised to be stored, at most (QuestionsRepo.pending). */
export const FINDING_STORED_WAIT_MS = 10 * 60_000;

export class QuestionsRepo implements ClassifierStore, PlanStore, ResultSink {
  /** When this repo last deleted old done rows (prunePending). */
  private prunedAt = 0;

  constructor(private readonly db: Queryable) {}

  // ---- the fast classifier ----

  async load(keys: readonly string[]): Promise<Map<string, SavedModel>> {
    return this.loadModels(keys);
  }

  async loadModels(keys: readonly string[]): Promise<Map<string, SavedModel>> {
    const out = new Map<string, SavedModel>();
    if (!keys.length) return out;
    const res = await this.db.query<Row>('SELECT question_key, model FROM classifier_models WHERE question_key = ANY($1::text[])', [[...keys]]);
    for (const r of res.rows) out.set(String(r.question_key), r.model as SavedModel);
    return out;
  }

  async save(models: readonly { key: string; check_id: string; model: SavedModel }[]): Promise<void> {
    for (const part of chunks(models, 50)) {
      const params: unknown[] = [];
      for (const m of part) params.push(text(m.key), text(m.check_id), m.model.n, json(m.model));
      await this.db.query(
        `INSERT INTO classifier_models (question_key, check_id, examples, model)
         VALUES ${valuesList(part.length, ['text', 'text', 'int4', 'jsonb'])}
         ON CONFLICT (question_key) DO UPDATE SET examples = EXCLUDED.examples, model = EXCLUDED.model, updated_at = now()`,
        params,
      );
    }
  }

  // ---- agreement ----

  readonly agreement: AgreementStore = {
    load: (keys) => this.loadAgreement(keys),
    save: (records) => this.saveAgreement(records),
    list: () => this.listAgreement(),
  };

  async loadAgreement(keys: readonly string[]): Promise<Map<string, AgreementRecord>> {
    const out = new Map<string, AgreementRecord>();
    if (!keys.length) return out;
    const res = await this.db.query<Row>('SELECT question_key, check_id, answers, agreed, recent FROM question_agreement WHERE question_key = ANY($1::text[])', [[...keys]]);
    for (const r of res.rows) out.set(String(r.question_key), toAgreement(r));
    return out;
  }

  async saveAgreement(records: readonly AgreementRecord[]): Promise<void> {
    for (const part of chunks(records, 100)) {
      const params: unknown[] = [];
      for (const r of part) params.push(text(r.key), text(r.check_id), r.answers, r.agreed, r.recent);
      await this.db.query(
        `INSERT INTO question_agreement (question_key, check_id, answers, agreed, recent)
         VALUES ${valuesList(part.length, ['text', 'text', 'int4', 'int4', 'text'])}
         ON CONFLICT (question_key) DO UPDATE SET answers = EXCLUDED.answers, agreed = EXCLUDED.agreed, recent = EXCLUDED.recent, updated_at = now()`,
        params,
      );
    }
  }

  async listAgreement(): Promise<AgreementRecord[]> {
    const res = await this.db.query<Row>('SELECT question_key, check_id, answers, agreed, recent FROM question_agreement ORDER BY question_key');
    return res.rows.map(toAgreement);
  }

  // ---- plans ----

  async get(project: string, workflow: string): Promise<Plan | undefined> {
    const res = await this.db.query<Row>('SELECT plan FROM question_plans WHERE project = $1 AND workflow = $2', [project, workflow]);
    return res.rows[0] ? (res.rows[0].plan as Plan) : undefined;
  }

  async put(plan: Plan): Promise<void> {
    await this.db.query(
      `INSERT INTO question_plans (project, workflow, tools, plan, planned_by) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5)
       ON CONFLICT (project, workflow) DO UPDATE SET tools = EXCLUDED.tools, plan = EXCLUDED.plan, planned_by = EXCLUDED.planned_by, updated_at = now()`,
      [text(plan.project), text(plan.workflow), json(plan.tools), json(plan), plan.planned_by],
    );
  }

  // ---- results ----

  /**
   * What the run page needs of the results: the questions left not checked (a model error or
   * timeout: never a pass), each stored once (a redelivered task finds its row). An answered
   * question is not kept as a row: a flagged answer is its finding, and an answer otherwise
   * says only that nothing was found, which nothing reads. It takes back the not-checked rows it
   * answers, those of the same check about the same span (or the run) from no later than it.
   * Nearly every result is an answer, and storing each cost about what a span row does (a
   * 30,000-span embedded run: 14,270 rows, 1.25 s of PGlite's thread).
   *
   * A run's tasks arrive in order (one bus key a run), so an answer always comes after the
   * not-checked rows it takes back; within one call they are inserted first. Rows go as one
   * JSON parameter unpacked by json_to_recordset, as the spans and findings do.
   */
  async record(results: readonly QuestionResult[]): Promise<void> {
    // Each result's task is no longer waiting (questions_pending): marked done, or its row made
    // done if its hand-over is recorded after it (the two come from different services). One
    // whose answer raised a finding waits until the finding is stored too (see pending).
    for (const part of chunks(results, 1_000)) {
      await this.db.query(
        `INSERT INTO question_pending (task_id, project, run_id, done, done_at, finding_id)
         SELECT DISTINCT ON (t) t, p, r, true, now(), f FROM json_to_recordset($1::json) AS v (t text, p text, r text, f text)
         ON CONFLICT (task_id) DO UPDATE SET done = true, done_at = now(), finding_id = EXCLUDED.finding_id WHERE NOT question_pending.done`,
        [json(part.map((r) => ({ t: text(r.task_id), p: text(r.project), r: text(r.run_id), f: text(r.finding_id) })))],
      );
    }
    await this.prunePending();
    const notChecked = results.filter((r) => r.answer.status === 'not_checked');
    for (const part of chunks(notChecked, 500)) {
      const rows = part.map((r) => {
        const a = r.answer;
        return {
          task_id: text(r.task_id), project: text(r.project), run_id: text(r.run_id), check_id: text(r.check_id), anchor: text(r.anchor),
          span_ids: r.span_ids, status: a.status, flagged: a.flagged, probability: a.probability ?? null, value: a.value ?? null,
          label: text(a.label), quote: text(a.quote), answered_by: text(a.answered_by), confidence: text(a.confidence), reason: text(a.reason),
          finding_id: text(r.finding_id), at: tsParam(r.at_ms),
        };
      });
      await this.db.query(
        `INSERT INTO question_results (task_id, project, run_id, check_id, anchor, span_ids, status, flagged, probability, value, label, quote,
           answered_by, confidence, reason, finding_id, at)
         SELECT * FROM json_to_recordset($1::json) AS v (task_id text, project text, run_id text, check_id text, anchor text, span_ids jsonb,
           status text, flagged boolean, probability float8, value float8, label text, quote text, answered_by text, confidence text,
           reason text, finding_id text, at timestamptz)
         ON CONFLICT (task_id) DO NOTHING`,
        [json(rows)],
      );
    }
    // The latest answer per check and anchor: one row each to look up.
    const answered = new Map<string, { p: string; r: string; c: string; a: string; m: number }>();
    for (const r of results) {
      if (r.answer.status !== 'answered') continue;
      const key = `${r.project}\u0000${r.run_id}\u0000${r.check_id}\u0000${r.anchor}`;
      const seen = answered.get(key);
      if (!seen) answered.set(key, { p: text(r.project)!, r: text(r.run_id)!, c: text(r.check_id)!, a: text(r.anchor)!, m: r.at_ms });
      else if (r.at_ms > seen.m) seen.m = r.at_ms;
    }
    for (const part of chunks([...answered.values()], 1_000)) {
      await this.db.query(
        `DELETE FROM question_results q USING json_to_recordset($1::json) AS x (p text, r text, c text, a text, at timestamptz)
          WHERE q.project = x.p AND q.run_id = x.r AND q.check_id = x.c AND q.anchor = x.a AND q.status = 'not_checked' AND q.at <= x.at`,
        // the keys in the same order, each row made once (a rest and a spread made two)
        [json(part.map((x) => ({ p: x.p, r: x.r, c: x.c, a: x.a, at: tsParam(x.m) })))],
      );
    }
  }

  /**
   * The results of question tasks given up (their bus record set aside: the question service
   * kept failing on it), recorded as `record` does, except those of tasks whose result is in
   * already (a try before the record was set aside got that far): a task given up is no longer
   * waiting (questions_pending), and the run page lists it as not checked.
   */
  async givenUp(results: readonly QuestionResult[]): Promise<void> {
    if (!results.length) return;
    const res = await this.db.query<Row>('SELECT task_id FROM question_pending WHERE task_id = ANY($1::text[]) AND done', [results.map((r) => r.task_id)]);
    const done = new Set(res.rows.map((r) => String(r.task_id)));
    const left = results.filter((r) => !done.has(r.task_id));
    if (left.length) await this.record(left);
  }

  /**
   * The question tasks handed to the question service: each waits (questions_pending) until its
   * result is recorded. One statement for a step's tasks; a task handed over again (a batch
   * delivered twice, the run's end asking the same task again) neither counts twice nor waits
   * again once its result is in.
   */
  async handed(tasks: readonly HandedTask[]): Promise<void> {
    for (const part of chunks(tasks, 1_000)) {
      await this.db.query(
        `INSERT INTO question_pending (task_id, project, run_id)
         SELECT DISTINCT ON (t) t, p, r FROM json_to_recordset($1::json) AS v (t text, p text, r text)
         ON CONFLICT (task_id) DO NOTHING`,
        [json(part.map((t) => ({ t: text(t.task_id), p: text(t.project), r: text(t.run_id) })))],
      );
    }
  }

  /**
   * Deletes the rows of tasks done more than PENDING_DONE_KEPT_MS ago (their hand-over, recorded
   * beside the rule engine's step, has come long since): at most once a minute, 10,000 at a time.
   */
  private async prunePending(): Promise<void> {
    const now = Date.now();
    if (now - this.prunedAt < 60_000) return;
    this.prunedAt = now;
    await this.db.query(
      `DELETE FROM question_pending WHERE task_id IN (
         SELECT task_id FROM question_pending WHERE done AND done_at < now() - $1::bigint * interval '1 millisecond' LIMIT 10000)`,
      [PENDING_DONE_KEPT_MS],
    );
  }

  /**
   * How many of a run's question tasks wait for their result (handed over, none recorded yet),
   * or for the finding their answer raised to be stored: the question service records a result
   * once it has published its finding, and the review service stores the finding as it comes off
   * the bus, moments later, so at 0 the run's question findings are there to read. A finding not
   * stored within FINDING_STORED_WAIT_MS of its result (the store set it aside) no longer counts.
   */
  async pending(project: string, runId: string): Promise<number> {
    const res = await this.db.query<{ n: unknown }>(
      `SELECT count(*)::int AS n FROM question_pending q WHERE q.project = $1 AND q.run_id = $2
         AND (NOT q.done OR (q.finding_id IS NOT NULL AND q.done_at > now() - $3::bigint * interval '1 millisecond'
           AND NOT EXISTS (SELECT 1 FROM findings f WHERE f.id = q.finding_id)))`,
      [project, runId, FINDING_STORED_WAIT_MS],
    );
    return num(res.rows[0]?.n);
  }

  /** A run's stored question results, oldest first: its questions still not checked (answers are not kept, see record). */
  async results(project: string, runId: string): Promise<QuestionResultRecord[]> {
    const res = await this.db.query<Row>('SELECT * FROM question_results WHERE project = $1 AND run_id = $2 ORDER BY at, task_id', [project, runId]);
    return res.rows.map((r) => ({
      task_id: String(r.task_id),
      project: String(r.project),
      run_id: String(r.run_id),
      check_id: String(r.check_id),
      anchor: String(r.anchor),
      span_ids: (r.span_ids as string[]) ?? [],
      status: r.status as QuestionResultRecord['status'],
      flagged: Boolean(r.flagged),
      probability: r.probability === null ? null : num(r.probability),
      value: r.value === null ? null : num(r.value),
      label: (r.label as string | null) ?? null,
      quote: (r.quote as string | null) ?? null,
      answered_by: (r.answered_by as Answer['answered_by'] | null) ?? null,
      confidence: (r.confidence as string | null) ?? null,
      reason: (r.reason as string | null) ?? null,
      finding_id: (r.finding_id as string | null) ?? null,
      at: isoNonNull(r.at),
    }));
  }
}

function toAgreement(r: Row): AgreementRecord {
  return { key: String(r.question_key), check_id: String(r.check_id), answers: num(r.answers), agreed: num(r.agreed), recent: String(r.recent ?? '') };
}
