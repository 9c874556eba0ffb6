import type { PreviewResult, PreviewRun } from '@neatroots/api';
import type { Check, FindingEvent } from '@neatroots/checks';
import type { ModelConfig } from '@neatroots/platform';
import type { ChatModel } from '@neatroots/ports';
import type { ReviewQueries, RunRecord } from '@neatroots/store';
import type { RunEnd, RunStart, Span, StreamItem } from '@neatroots/spans';
import { findingLine, Replayer } from '../replay';

/**
 * A check previewed on a project's recent runs before it is saved (the seed: "preview it on
 * recent runs before saving"). The runs are read back from review and replayed through the
 * real rule engine and the real question path (Replayer: the modules of `neatroots start` on
 * a replay platform), with the candidate check alone, so what it reports is what replay
 * reports on the same runs. Bounded: the most recent `runs` runs, at most `maxSpans` spans a
 * run, and at most `modelCalls` model calls; it says what it left out.
 */

export const DEFAULT_PREVIEW_RUNS = 20;
export const DEFAULT_PREVIEW_MODEL_CALLS = 20;
/** Spans read back per run: a run longer than this is previewed on its first ones (and says so). */
export const MAX_PREVIEW_SPANS = 2_000;

export interface PreviewInput {
  project: string;
  check: Check;
  warnings: string[];
  runs: number;
  modelCalls: number;
  queries: ReviewQueries;
  /** The models configured (none: the built-in fast classifier answers questions, no model calls). */
  models?: ModelConfig;
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

/** Counts the model calls of a preview, and refuses those over its budget (the question is then not checked). */
export class CallBudget {
  used = 0;
  exhausted = false;
  constructor(readonly limit: number) {}

  wrap(model: ChatModel): ChatModel {
    return {
      role: model.role,
      id: model.id,
      name: model.name,
      complete: (req) => {
        if (this.used >= this.limit) {
          this.exhausted = true;
          return Promise.reject(new Error(`the preview's ${this.limit} model calls are used up`));
        }
        this.used++;
        return model.complete(req);
      },
    };
  }
}

export async function previewCheck(input: PreviewInput): Promise<PreviewResult> {
  const { project, check, queries } = input;
  // One more than asked: whether there are runs beyond the limit.
  const page = await queries.listRuns(project, { limit: Math.min(input.runs + 1, 200) });
  const more = page.items.length > input.runs || page.next_cursor !== null;
  // Oldest first, as they happened.
  const runs = page.items.slice(0, input.runs).reverse();
  const budget = new CallBudget(input.modelCalls);
  const events = new Map<string, FindingEvent>();
  const notChecked = new Map<string, string>();
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
  const truncated: string[] = [];
  try {
    for (const run of runs) {
      const { items, truncated: cut } = await runItems(queries, project, run);
      if (cut) truncated.push(run.run_id);
      for (const item of items) await replayer.push(item);
    }
    await replayer.end();
  } finally {
    await replayer.close();
  }
  const byRun = new Map<string, FindingEvent[]>();
  for (const f of events.values()) byRun.set(f.run_id, [...(byRun.get(f.run_id) ?? []), f]);
  const flagged: PreviewRun[] = runs
    .filter((r) => byRun.has(r.run_id))
    .reverse()
    .map((r) => ({ run_id: r.run_id, workflow: r.workflow, started_at: r.started_at, findings: byRun.get(r.run_id)!.map(findingLine) }));
  const words = [
    `the ${runs.length} most recent run${runs.length === 1 ? '' : 's'} of project ${project}${more ? ` (older runs not previewed; at most ${input.runs} asked)` : ''}`,
    `at most ${budget.limit} model calls (${budget.used} made${budget.exhausted ? ', the rest of the questions not checked' : ''})`,
  ];
  if (truncated.length) words.push(`only the first ${MAX_PREVIEW_SPANS} spans of ${truncated.join(', ')}`);
  return {
    check: { id: check.id, kind: check.kind, action: check.action },
    warnings: input.warnings,
    runs: { checked: runs.length, limit: input.runs, flagged: flagged.length, more },
    model_calls: { used: budget.used, limit: budget.limit, exhausted: budget.exhausted },
    flagged,
    not_checked: [...notChecked].map(([run_id, reason]) => ({ run_id, reason })),
    bounds: `Previewed on ${words.join('; ')}.`,
  };
}
