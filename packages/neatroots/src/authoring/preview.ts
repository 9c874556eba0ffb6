import { AuthoringError, type PreviewResult, type PreviewRun } from '@neatroots/api';
import type { Check, FindingEvent } from '@neatroots/checks';
import type { ModelConfig } from '@neatroots/platform';
import { ModelError, type ChatModel } from '@neatroots/ports';
import type { ReviewQueries, RunRecord } from '@neatroots/store';
import type { RunEnd, RunStart, Span, StreamItem } from '@neatroots/spans';
import { findingLine, Replayer } from '../replay';

/**
 * A check previewed on a project's recent runs before it is saved (the seed: "preview it on
 * recent runs before saving"). The runs are read back from review and replayed through the
 * real rule engine and the real question path (Replayer: the modules of `neatroots start` on
 * a replay platform), with the candidate check alone, so what it reports is what replay
 * reports on the same runs. Bounded: the most recent `runs` runs, at most `maxSpans` spans a
 * run, and at most `modelCalls` model calls; it says what it left out. A run whose spans
 * retention deleted is not replayed (there is nothing left to check: it would pass every rule)
 * but listed as not checked, with the day they went.
 */

export const DEFAULT_PREVIEW_RUNS = 20;
export const DEFAULT_PREVIEW_MODEL_CALLS = 20;
/** Spans read back per run: a run longer than this is previewed on its first ones (and says so). */
export const MAX_PREVIEW_SPANS = 2_000;
/**
 * A preview's wall-clock bound when its caller sets none (the REST endpoint, the CLI): below the
 * 5 minutes `neatroots checks preview` waits, so its answer always comes, saying what it covered.
 */
export const DEFAULT_PREVIEW_MS = 120_000;
/**
 * Runs a question check's preview asks about at once, at most: each is replayed by a replayer of
 * its own (one run at a time, as replay does), so a slow model answers several runs in the time
 * of one. Fewer when the model takes fewer requests at once (its NEATROOTS_*_CONCURRENCY), and 1
 * for a rule or without a model (nothing to wait for). Kept small: the live question checks use
 * the same model.
 */
export const MAX_PREVIEW_LANES = 4;

export interface PreviewInput {
  project: string;
  check: Check;
  warnings: string[];
  runs: number;
  modelCalls: number;
  queries: ReviewQueries;
  /** The models configured (none: the built-in fast classifier answers questions, no model calls). */
  models?: ModelConfig;
  /** Aborted when the caller gives up: the preview's model calls are aborted, none is made after, and it stops (throws 499 cancelled). */
  signal?: AbortSignal;
  /** The most wall-clock time (ms): past it the preview answers with what it covered, the rest not checked. */
  timeMs?: number;
  /** Runs replayed at once (default: previewLanes). */
  lanes?: number;
}

/**
 * Runs replayed at once for a check: a question's preview waits on the model, so it asks about as
 * many runs at once as the model that answers questions takes requests (at most
 * MAX_PREVIEW_LANES); a rule's, or one without a model, has nothing to wait for.
 */
export function previewLanes(check: Check, models: ModelConfig | undefined, runs: number): number {
  if (check.kind === 'rule' || !models || models.backend === 'classifier') return 1;
  const answers = models.backend === 'local' ? models.local : models.backend === 'decision' ? models.decision : (models.decision ?? models.local);
  return Math.max(1, Math.min(MAX_PREVIEW_LANES, answers?.concurrency ?? 1, runs));
}

/** The items of one stored run, in the order replay takes them: run_start, spans, run_end. */
export async function runItems(queries: ReviewQueries, project: string, run: RunRecord, maxSpans = MAX_PREVIEW_SPANS): Promise<{ items: StreamItem[]; truncated: boolean }> {
  const detail = await queries.getRun(project, run.run_id);
  if (!detail) return { items: [], truncated: false };
  const spans: Span[] = [...detail.spans];
  let cursor = detail.spans_next_cursor;
  while (cursor && spans.length < maxSpans) {
    const page = await queries.listSpans(project, run.run_id, { cursor });
    if (!page) break;
    spans.push(...page.items);
    cursor = page.next_cursor;
  }
  const truncated = spans.length > maxSpans || !!cursor;
  const started = Date.parse(detail.run.started_at);
  const start: RunStart = {
    ...(detail.run.run_start ?? { event: 'run_start', run_id: run.run_id }),
    event: 'run_start',
    run_id: run.run_id,
    project,
    ...(detail.run.workflow ? { workflow: detail.run.workflow } : {}),
    ...(detail.run.session_id ? { session_id: detail.run.session_id } : {}),
  };
  if (start.ts_ms === undefined && Number.isFinite(started)) start.ts_ms = started;
  const items: StreamItem[] = [{ kind: 'run_start', run: start }];
  for (const s of spans.slice(0, maxSpans)) items.push({ kind: 'span', span: { ...s, project } });
  if (detail.run.end_status) {
    const end: RunEnd = { event: 'run_end', run_id: run.run_id, status: detail.run.end_status };
    if (detail.run.final_output !== undefined && detail.run.final_output !== null) end.final_output = detail.run.final_output;
    const ended = detail.run.ended_at ? Date.parse(detail.run.ended_at) : NaN;
    if (Number.isFinite(ended)) end.ts_ms = ended;
    items.push({ kind: 'run_end', run: end });
  }
  return { items, truncated };
}

/**
 * Counts the model calls of a preview, and refuses those over its budget (the question is then
 * not checked). Once `stop` is aborted (the caller gave up, or the preview's time ran out) the
 * call in flight is aborted and every later one refused, none reaching the model: `why` says
 * why, as the question's reason.
 */
export class CallBudget {
  used = 0;
  exhausted = false;
  constructor(
    readonly limit: number,
    private readonly stop?: AbortSignal,
    private readonly why: () => string = () => 'the preview was stopped',
  ) {}

  wrap(model: ChatModel): ChatModel {
    const { stop } = this;
    return {
      role: model.role,
      id: model.id,
      name: model.name,
      complete: (req) => {
        if (stop?.aborted) return Promise.reject(new ModelError('aborted', this.why()));
        if (this.used >= this.limit) {
          this.exhausted = true;
          return Promise.reject(new Error(`the preview's ${this.limit} model calls are used up`));
        }
        this.used++;
        if (!stop) return model.complete(req);
        return model.complete({ ...req, signal: req.signal ? AbortSignal.any([stop, req.signal]) : stop }).catch((e: unknown) => {
          throw stop.aborted ? new ModelError('aborted', this.why(), undefined, { cause: e }) : e;
        });
      },
    };
  }
}

/** What a preview answers when its caller gave up (nobody reads it: the connection is gone or the call cancelled). */
function cancelled(): AuthoringError {
  return new AuthoringError(499, 'cancelled', 'the preview was stopped: its caller gave up (closed the connection or cancelled the call) before the answer');
}

export async function previewCheck(input: PreviewInput): Promise<PreviewResult> {
  const { project, check, queries } = input;
  if (input.signal?.aborted) throw cancelled();
  // Stops the preview: its caller gave up (input.signal), or its time ran out (timeMs).
  const stop = new AbortController();
  const giveUp = () => stop.abort();
  input.signal?.addEventListener('abort', giveUp, { once: true });
  let timeUp = false;
  const seconds = input.timeMs !== undefined ? Math.round(input.timeMs / 100) / 10 : 0;
  const timer =
    input.timeMs !== undefined
      ? setTimeout(() => {
          timeUp = true;
          stop.abort();
        }, input.timeMs)
      : undefined;
  try {
    // One more than asked: whether there are runs beyond the limit.
    const page = await queries.listRuns(project, { limit: Math.min(input.runs + 1, 200) });
    const more = page.items.length > input.runs || page.next_cursor !== null;
    // Oldest first, as they happened.
    const runs = page.items.slice(0, input.runs).reverse();
    // A run whose spans retention deleted has nothing to replay: not checked, never a pass.
    const expired = runs.filter((r) => r.spans_expired_at !== null);
    const kept = runs.filter((r) => r.spans_expired_at === null);
    const budget = new CallBudget(input.modelCalls, stop.signal, () =>
      timeUp ? `the preview's time (${seconds} s) ran out before the answer` : 'the preview was stopped: its caller gave up',
    );
    const events = new Map<string, FindingEvent>();
    const notChecked = new Map<string, string>();
    const truncated: string[] = [];
    // The runs replayed to their end; when the preview was stopped, the runs cut short, and (the rest) those not reached.
    const done = new Set<string>();
    const cut = new Set<string>();
    // Each lane replays the next run not taken yet, oldest first, on a replayer of its own (one
    // run at a time, as replay does); the lanes share the model-call budget and the time bound.
    let next = 0;
    const lane = async () => {
      const replayer = new Replayer({
        checks: [check],
        onFinding: (f) => events.set(f.id, f),
        models: input.models,
        wrapModels: (m) => ({
          ...(m.decision ? { decision: budget.wrap(m.decision) } : {}),
          ...(m.local ? { local: budget.wrap(m.local) } : {}),
          ...(m.reasoning ? { reasoning: budget.wrap(m.reasoning) } : {}),
        }),
        onNotChecked: (r) => {
          if (!notChecked.has(r.run_id)) notChecked.set(r.run_id, r.answer.status === 'not_checked' ? (r.answer.reason ?? 'not checked') : 'not checked');
        },
        log: () => undefined,
      });
      try {
        while (next < kept.length && !stop.signal.aborted) {
          const run = kept[next++];
          const { items, truncated: shortened } = await runItems(queries, project, run);
          if (shortened) truncated.push(run.run_id);
          let pushed = 0;
          for (const item of items) {
            if (stop.signal.aborted) break;
            await replayer.push(item);
            pushed++;
          }
          if (pushed < items.length) {
            cut.add(run.run_id);
            break;
          }
          done.add(run.run_id);
        }
        // Stopped by its time: the questions still to answer are refused a model call, so listed as not checked.
        if (!input.signal?.aborted) await replayer.end();
      } finally {
        await replayer.close();
      }
    };
    const lanes = Math.min(input.lanes ?? previewLanes(check, input.models, kept.length), Math.max(1, kept.length));
    const ran = await Promise.allSettled(Array.from({ length: lanes }, () => lane()));
    if (input.signal?.aborted) throw cancelled();
    for (const r of ran) if (r.status === 'rejected') throw r.reason;
    for (const r of expired) notChecked.set(r.run_id, `its spans were deleted by retention on ${(r.spans_expired_at ?? '').slice(0, 10)} (NEATROOTS_SPAN_RETENTION_DAYS): not replayed`);
    const left = kept.filter((r) => !done.has(r.run_id));
    for (const r of left) {
      notChecked.set(r.run_id, cut.has(r.run_id) ? `the preview's time (${seconds} s) ran out part way through this run` : `the preview's time (${seconds} s) ran out before this run`);
    }
    const replayed = done.size;
    const byRun = new Map<string, FindingEvent[]>();
    for (const f of events.values()) if (!cut.has(f.run_id)) byRun.set(f.run_id, [...(byRun.get(f.run_id) ?? []), f]);
    const flagged: PreviewRun[] = runs
      .filter((r) => byRun.has(r.run_id))
      .reverse()
      .map((r) => ({ run_id: r.run_id, workflow: r.workflow, started_at: r.started_at, findings: byRun.get(r.run_id)!.map(findingLine) }));
    const recent = `${runs.length} most recent run${runs.length === 1 ? '' : 's'} of project ${project}${more ? ` (older runs not previewed; at most ${input.runs} asked)` : ''}`;
    const words = [
      replayed < kept.length ? `${replayed} of the ${recent}, taken oldest first` : `the ${recent}`,
      ...(expired.length
        ? [`${expired.length} of them not replayed: ${expired.length === 1 ? 'its' : 'their'} spans were deleted by retention (in not_checked)`]
        : []),
      `at most ${budget.limit} model calls (${budget.used} made${budget.exhausted ? ', the rest of the questions not checked' : ''})`,
    ];
    if (timeUp) {
      words.push(
        `stopped at its ${seconds} s bound${left.length ? `: ${left.length} run${left.length === 1 ? '' : 's'} not replayed to the end, in not_checked` : ', the questions it had not answered in not_checked'}`,
      );
    }
    if (truncated.length) words.push(`only the first ${MAX_PREVIEW_SPANS} spans of ${truncated.join(', ')}`);
    return {
      check: { id: check.id, kind: check.kind, action: check.action },
      warnings: input.warnings,
      runs: { checked: replayed, limit: input.runs, flagged: flagged.length, more },
      model_calls: { used: budget.used, limit: budget.limit, exhausted: budget.exhausted },
      flagged,
      not_checked: [...notChecked].map(([run_id, reason]) => ({ run_id, reason })),
      bounds: `Previewed on ${words.join('; ')}.`,
    };
  } finally {
    clearTimeout(timer);
    input.signal?.removeEventListener('abort', giveUp);
  }
}
