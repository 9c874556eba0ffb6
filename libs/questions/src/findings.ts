import { fillGuidance, findingId, type FindingEvent, type NoteOut } from '@neatroots/checks';
import type { WindowStore } from '@neatroots/ports';
import type { Priority } from './batcher';
import { quoteParts, spanQuoteText } from './quote';
import { saveWindows } from './windows';
import type { Answer, EvidenceDoc, QuestionTask } from './types';

/**
 * Question findings per run, in the question service's own window (the window store, keys
 * prefixed "qf"): the seed's "A finding is raised when ... a probability crosses the line ...
 * resolved when a later check of the same question falls below the line". A span-scope
 * question raises at most one finding per run; later calls that show the same problem join it.
 * A "not checked" answer changes nothing: it is never a pass.
 */
export interface QuestionFindingsWindow {
  v: 1;
  /** The store's revision when loaded: saves are compare-and-set. */
  rev?: number;
  project: string;
  run_id: string;
  workflow?: string;
  checks: Record<string, { raised: number; open?: { id: string; count: number; spans: string[] } }>;
  /** Task ids answered (a redelivered batch applies nothing twice; one not checked is asked again), newest last. */
  done: string[];
  noted_groups?: Record<string, string>;
}

export function findingsKey(project: string, runId: string): string {
  return `qf\u0000${project}\u0000${runId}`;
}

/** Findings of questions sort under rules of the same group unless a check says otherwise. */
export const DEFAULT_QUESTION_PRIORITY = 65;
const MAX_DONE = 2_000;
const MAX_SPANS = 50;

export interface FindingsStep {
  windows: Map<string, QuestionFindingsWindow>;
  touched: Set<string>;
  /** Windows of runs whose end was asked about (a final task): saved at rest (WindowSave.rest). */
  ended: Set<string>;
  emitted: { ev: FindingEvent; task: QuestionTask; answer: Answer; w: QuestionFindingsWindow }[];
}

export interface FindingsOutput {
  findings: FindingEvent[];
  notes: NoteOut[];
  /** Saves the windows; call after the findings and notes are published. */
  commit(): Promise<void>;
}

export interface QuestionFindingsOptions {
  windows: WindowStore<QuestionFindingsWindow>;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  ttlMs?: number;
}

/** The span ids of the evidence whose text holds the quote: what the run page points at. */
export function spansWithQuote(doc: EvidenceDoc, quote: string | undefined): string[] {
  if (!quote) return [];
  const parts = quoteParts(quote);
  if (!parts.length) return [];
  const out: string[] = [];
  for (const s of doc.spans) {
    const text = spanQuoteText(s);
    if (parts.every((p) => text.includes(p))) out.push(s.id);
  }
  return out;
}

export class QuestionFindings {
  private readonly ttl: number;
  /** findingsKey's answers by project then run: asked several times a task, made once a run. */
  private readonly keys = new Map<string, Map<string, string>>();
  private keysSize = 0;

  constructor(private readonly opts: QuestionFindingsOptions) {
    this.ttl = opts.ttlMs ?? 6 * 60 * 60_000;
  }

  async begin(tasks: readonly QuestionTask[]): Promise<FindingsStep> {
    const keys = [...new Set(tasks.map((t) => this.key(t)))];
    const windows = await this.opts.windows.load(keys);
    return { windows, touched: new Set(), ended: new Set(), emitted: [] };
  }

  /** findingsKey(t.project, t.run_id). */
  private key(t: QuestionTask): string {
    let byRun = this.keys.get(t.project);
    let k = byRun?.get(t.run_id);
    if (k !== undefined) return k;
    if (this.keysSize >= 10_000) {
      this.keys.clear();
      this.keysSize = 0;
      byRun = undefined;
    }
    if (!byRun) this.keys.set(t.project, (byRun = new Map()));
    byRun.set(t.run_id, (k = findingsKey(t.project, t.run_id)));
    this.keysSize++;
    return k;
  }

  private window(step: FindingsStep, t: QuestionTask, key: string): QuestionFindingsWindow {
    let w = step.windows.get(key);
    if (!w) {
      w = { v: 1, project: t.project, run_id: t.run_id, checks: {}, done: [] };
      step.windows.set(key, w);
    }
    if (t.workflow) w.workflow = t.workflow;
    return w;
  }

  isDone(step: FindingsStep, t: QuestionTask): boolean {
    return step.windows.get(this.key(t))?.done.includes(t.id) ?? false;
  }

  apply(step: FindingsStep, t: QuestionTask, a: Answer): FindingEvent | undefined {
    const key = this.key(t);
    const w = this.window(step, t, key);
    step.touched.add(key);
    // The run's end was asked about: what comes for it later (a late span's question) is rare.
    if (t.final) step.ended.add(key);
    if (w.done.includes(t.id)) return undefined;
    // A task not checked (a model error or timeout) is not done: asked again (the run's end
    // asks a live trace question's last task again), it is answered.
    if (a.status !== 'answered') return undefined;
    w.done.push(t.id);
    if (w.done.length > MAX_DONE) w.done.splice(0, w.done.length - MAX_DONE);
    const st = (w.checks[t.check.id] ??= { raised: 0 });
    const spans = t.scope === 'span' ? [t.anchor] : spansWithQuote(t.evidence, a.quote);
    let status: FindingEvent['status'];
    if (a.flagged) {
      if (st.open) {
        st.open.count++;
        for (const s of spans) if (!st.open.spans.includes(s)) st.open.spans.push(s);
        if (st.open.spans.length > MAX_SPANS) st.open.spans.splice(0, st.open.spans.length - MAX_SPANS);
        status = 'updated';
      } else {
        st.raised++;
        // A re-raise after a resolve is a new finding: the anchor counts the raises in the run.
        st.open = { id: findingId(t.project, t.run_id, t.check.id, `question:${st.raised}`), count: 1, spans: [...spans] };
        status = 'raised';
      }
    } else {
      // A span's call passing does not undo another call's problem; a trace or session
      // question's later answer is about the same thing, so it resolves it.
      if (!st.open || t.scope === 'span' || a.unsupported) return undefined;
      status = 'resolved';
    }
    const open = st.open!;
    const ev = this.event(t, a, status, open, w);
    if (status === 'resolved') st.open = undefined;
    step.emitted.push({ ev, task: t, answer: a, w });
    return ev;
  }

  private event(t: QuestionTask, a: Answer, status: FindingEvent['status'], open: { id: string; count: number; spans: string[] }, w: QuestionFindingsWindow): FindingEvent {
    const c = t.check;
    const focus = t.evidence.spans.find((s) => s.id === t.anchor);
    const guidance = fillGuidance(c.guidance ?? c.title, { count: open.count, tool: focus?.tool, name: focus?.name ?? c.title });
    const ev: FindingEvent = {
      id: open.id,
      check_id: c.id,
      run_id: t.run_id,
      project: t.project,
      status,
      span_ids: [...open.spans],
      count: open.count,
      action: 'flag',
      title: c.title,
      guidance,
      at_ms: t.at_ms,
      priority: c.priority ?? DEFAULT_QUESTION_PRIORITY,
      kind: c.kind,
      source: c.source,
    };
    if (t.received_ms !== undefined) ev.received_ms = t.received_ms;
    if (w.workflow) ev.workflow = w.workflow;
    if (c.group) ev.group = c.group;
    if (status !== 'resolved') {
      if (a.quote) ev.quote = a.quote;
      if (a.probability !== undefined) ev.probability = a.probability;
      if (a.confidence) ev.confidence = a.confidence;
      if (a.answered_by) ev.answered_by = a.answered_by;
    }
    return ev;
  }

  /**
   * Notes for the raised findings (not for quiet checks; one per group per run), then the
   * output. `writeNote` gives the guidance for a check that has none of its own: ahead of the
   * questions in the model's queue (`note`) only when it goes to an agent still running; a
   * finding whose note is not sent (quiet, its group's note already sent, the run ended) gets
   * its guidance at the questions' own priority.
   */
  async finish(step: FindingsStep, writeNote?: (task: QuestionTask, answer: Answer, priority: Priority) => Promise<string | undefined>): Promise<FindingsOutput> {
    const findings: FindingEvent[] = [];
    const notes: NoteOut[] = [];
    const sends: boolean[] = [];
    for (const { ev, w } of step.emitted) {
      let send = ev.status === 'raised' && !(await this.opts.quiet?.(w.project, ev.check_id));
      if (send && ev.group) {
        const noted = (w.noted_groups ??= {});
        if (noted[ev.group]) send = false;
        else noted[ev.group] = ev.id;
      }
      sends.push(send);
    }
    const written = await Promise.all(
      step.emitted.map(({ ev, task, answer }, i) =>
        ev.status === 'raised' && !task.check.guidance && writeNote ? writeNote(task, answer, sends[i] && !task.final ? 'note' : 'normal') : Promise.resolve(undefined),
      ),
    );
    for (let i = 0; i < step.emitted.length; i++) {
      const { ev, w } = step.emitted[i];
      if (written[i]) ev.guidance = written[i]!;
      findings.push(ev);
      if (!sends[i]) continue;
      notes.push({
        id: `note-${ev.id}`,
        project: w.project,
        run_id: w.run_id,
        check_id: ev.check_id,
        finding_id: ev.id,
        kind: 'note',
        title: ev.title,
        text: ev.guidance,
        at_ms: ev.at_ms,
        ...(ev.group ? { group: ev.group } : {}),
      });
    }
    const windows = [...step.touched].map((key) => ({ key, window: step.windows.get(key)!, ttlMs: this.ttl, ...(step.ended.has(key) ? { rest: true } : {}) }));
    return {
      findings,
      notes,
      // Compare-and-set: a replica that took the partition over meanwhile wins, and this batch
      // is answered again from its windows (already applied tasks are skipped by id).
      commit: () => saveWindows(this.opts.windows, windows),
    };
  }
}
