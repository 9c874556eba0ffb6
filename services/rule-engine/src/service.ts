import { RuleEngine, windowKey, type EngineOutput, type FindingEvent, type RuleSet, type RunWindow } from '@neatroots/checks';
import { mergingBatches, RepeatedErrors, WindowConflictError, type Bus, type BusBatch, type LogFields, type RecordedClock, type Subscription, type Topic, type WindowStore } from '@neatroots/ports';
import { notChecked, type QuestionResult, type QuestionScheduler, type ResultSink, type SchedulerOutput } from '@neatroots/questions';
import { QUESTIONS_TOPIC, questionTaskRecords, type FindingMessage, type Note, type QuestionTask, type QuestionTaskMessage } from '@neatroots/messages';
import { itemRunId, type Envelope } from '@neatroots/spans';
import { haltingTools, Prechecker, type PrecheckAnswer, type PrecheckRequest } from './precheck';

export interface RuleEngineTopics {
  events: Topic<Envelope>;
  findings: Topic<FindingMessage>;
  notes: Topic<Note>;
}

export interface RuleEngineServiceOptions {
  bus: Bus;
  windows: WindowStore<RunWindow>;
  rules: () => RuleSet;
  topics: RuleEngineTopics;
  steering?: (project: string) => boolean | Promise<boolean>;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  /** Consumer group; replicas share it and split the partitions. */
  group?: string;
  /** How long a run's window is kept after its run_end, for late spans (default 10 minutes). */
  windowTtlAfterEndMs?: number;
  /** How long the window of a run that went quiet without a run_end is kept (default 6 hours). */
  windowTtlIdleMs?: number;
  /** How often pending requires_before waits are checked. */
  tickMs?: number;
  /**
   * A step not committed (its findings' publish failed) over the embedded stores leaves its
   * findings for the next step on its runs; if none came within this long (its batch set aside,
   * the run silent), the timer's tick takes them (default 5 s).
   */
  unsavedAfterMs?: number;
  /**
   * The recording's time (replay): no timer; a batch's items are taken one at a time, each at
   * its own time (what is due by then fires first), and end() fires every wait still pending.
   * Absent: the wall clock and the timer.
   */
  recorded?: RecordedClock;
  /**
   * Question checks: the scheduler runs beside the rule engine on the same batches and hands
   * the questions that are due to the question service (the questions topic). Without it the
   * service evaluates rules only.
   */
  questions?: {
    scheduler: QuestionScheduler;
    topic?: Topic<QuestionTaskMessage[]>;
    /** The scheduler's window store, when it is not `windows` (its batches may go on while it syncs only if it applies at call too). */
    windows?: Pick<WindowStore<unknown>, 'appliedAtCall' | 'coalesce' | 'checkpoint'>;
    /**
     * On a bus that tells its backlog (the embedded log): past this many question task records
     * not yet taken by the question service, a step's question tasks are not handed over (shed,
     * counted in `metrics.questionsShed`) while its findings and notes are. A model slower than
     * the spans' rate otherwise keeps every segment of the log, and the disk fills, which stops
     * the whole pipeline. 0 or absent: no bound.
     */
    maxBacklog?: number;
    /** What `maxBacklog` is set by, named in the reason a shed question is not checked (default NEATROOTS_MAX_QUESTION_BACKLOG). */
    maxBacklogSetting?: string;
    /**
     * Where a shed question is recorded as not checked, with why (the question results the run
     * page's `not_checked` lists): recorded with the step's findings, and the step is taken
     * again if that fails. Absent: shed questions are only counted. Its `handed`, if any, is
     * told the question tasks handed over (the run page's `questions_pending`).
     */
    results?: ResultSink;
  };
  /** The findings of a step once their publish was acknowledged (metrics: neatroots_finding_delay_seconds). */
  onFindingsPublished?: (findings: readonly FindingEvent[]) => void;
  /** Lines about runs carry their `project` and `run_id` in `fields`. */
  log?: (msg: string, err?: unknown, fields?: LogFields) => void;
  /** How often a pre-call check reads the run's window while it waits for the exported spans (Prechecker's default when absent). */
  precheckPollMs?: number;
  /**
   * Stores that coalesce saves (WindowStore.coalesce: the embedded journal) write the windows
   * saved since their last checkpoint this often; the bus position moves at the checkpoints.
   * 0 or absent: every save is written on its own. Not with `recorded`.
   */
  windowCheckpointMs?: number;
  /**
   * The partitions' batches that come together are taken as one step (mergingBatches): on
   * Redis and Kafka, where a step's window reads and writes and its publish are round trips that
   * cost the same for a few spans as for many, and at a steady, modest rate each batch holds a
   * few spans. Not on the embedded stores (a step's fixed cost is small there, and a merged step
   * holds its first findings back while the others are evaluated) nor for a recording (taken
   * item by item, in its order).
   */
  mergeBatches?: boolean;
}

export interface RuleEngineMetrics {
  consumed: number;
  batches: number;
  findings: number;
  notes: number;
  /** Question tasks handed to the question service. */
  questions: number;
  /** Question tasks not handed over because the question service was too far behind (questions.maxBacklog), counted once their step is done. */
  questionsShed: number;
  errors: number;
}

export interface RuleEngineService {
  engine: RuleEngine;
  metrics: RuleEngineMetrics;
  /** Would this call, about to run, halt its run? (the SDK's pre-call check, answered through ingest) */
  precheck(req: PrecheckRequest): Promise<PrecheckAnswer>;
  /** The tools a halting rule names in a project and workflow ('*': any tool call); none where steering is off. */
  haltingTools(project: string, workflow?: string): Promise<string[]>;
  /** The end of a recording (with `recorded`): no late span can come, so every pending wait fires. */
  end(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The rule-engine service: a consumer group on the events topic. For each batch it
 * evaluates the rule checks, publishes findings and notes, and only then saves the run
 * windows; the bus moves its offset after that (on the embedded default the next batch is
 * evaluated meanwhile: see `atCall`). A crash anywhere in between replays the batch against
 * the windows as they were, producing the same findings (same ids).
 */
export async function startRuleEngine(opts: RuleEngineServiceOptions): Promise<RuleEngineService> {
  const log = opts.log ?? ((msg, err, fields) => console.error(`rule-engine: ${msg}`, err ?? '', fields ?? ''));
  // A batch retried while its windows cannot be saved (Redis down, a full disk) fails alike each try.
  const repeats = new RepeatedErrors();
  const logFailure = (msg: string, err: unknown, fields: LogFields) => {
    const more = repeats.quieted(msg.replace(/\d+/g, 'N'), err);
    if (more !== undefined) log(`${msg}${more}`, err, fields);
  };
  const engine = new RuleEngine({
    windows: opts.windows,
    rules: opts.rules,
    steering: opts.steering,
    quiet: opts.quiet,
    ...(opts.windowTtlAfterEndMs !== undefined ? { ttlAfterEndMs: opts.windowTtlAfterEndMs } : {}),
    ...(opts.windowTtlIdleMs !== undefined ? { ttlIdleMs: opts.windowTtlIdleMs } : {}),
  });
  const metrics: RuleEngineMetrics = { consumed: 0, batches: 0, findings: 0, notes: 0, questions: 0, questionsShed: 0, errors: 0 };
  // Stores whose saves wait for a checkpoint (coalesced): a step that must wait for its saves
  // asks for the checkpoint at once instead of waiting for its interval.
  const coalesced: Pick<WindowStore<unknown>, 'coalesce' | 'checkpoint' | 'releaseBusy'>[] = [];
  const everyMs = opts.recorded ? 0 : (opts.windowCheckpointMs ?? 0);
  if (everyMs > 0) {
    // The engine changes the windows it loads in place: a checkpoint leaves those it is changing.
    if (opts.windows.coalesce) {
      opts.windows.coalesce({ everyMs, busy: (key) => engine.isChanging(key) });
      coalesced.push(opts.windows);
    }
    // The question scheduler changes copies, so its windows are never mid-step.
    const qs = opts.questions?.windows;
    if (qs?.coalesce && qs !== opts.windows) {
      qs.coalesce({ everyMs });
      coalesced.push(qs);
    }
  }
  const checkpointNow = () => coalesced.forEach((s) => s.checkpoint?.());
  const questionsTopic = opts.questions?.topic ?? QUESTIONS_TOPIC;

  // Sends what a step raised (findings, notes, question tasks) and counts it once sent;
  // undefined when there is nothing (no promise: replay takes most items with nothing raised).
  // `behind`: the question task records waiting when the step began, if past the bound (its
  // questions are shed: recorded as not checked, not handed over). `raisedSent`: the findings
  // and notes went out already (see `step`): only the question tasks are sent.
  const send = (out: EngineOutput, asked?: SchedulerOutput, behind?: number, raisedSent = false): Promise<void> | undefined => {
    // Published together: the Kafka bus gathers concurrent publishes into one send, so the
    // step waits for one acknowledgement instead of one per topic.
    const sends: Promise<void>[] = [];
    const findings = raisedSent ? [] : out.findings;
    const notes = raisedSent ? [] : out.notes;
    if (findings.length) sends.push(opts.bus.publish(opts.topics.findings, findings.map((f) => ({ key: f.run_id, value: f }))));
    if (notes.length) sends.push(opts.bus.publish(opts.topics.notes, notes.map((n) => ({ key: n.run_id, value: n }))));
    let tasks = asked?.tasks;
    let shed = 0;
    if (tasks?.length && asked?.shed) {
      // A plan task is kept: one per workflow, and what its questions are asked from.
      const dropped = tasks.filter((t) => t.type === 'question');
      tasks = tasks.filter((t) => t.type !== 'question');
      shed = dropped.length;
      if (shed && opts.questions?.results) sends.push(opts.questions.results.record(dropped.map((t) => notAsked(t, behind ?? 0))));
    }
    if (tasks?.length) {
      sends.push(opts.bus.publish(questionsTopic, questionTaskRecords(tasks)));
      // Each question task waits for its result from now (the run page's questions_pending),
      // recorded beside the steps, not by them (see handedWriter). A failure is said, not
      // retried: the run page would only count fewer questions waiting, as before they were counted.
      if (opts.questions?.results?.handed) handedWriter.add(tasks.filter((t): t is QuestionTask => t.type === 'question'));
    }
    const sent = () => {
      if (findings.length) opts.onFindingsPublished?.(findings);
      metrics.findings += findings.length;
      metrics.notes += notes.length;
      metrics.questions += tasks?.length ?? 0;
      if (shed) saidShed(shed, behind ?? 0);
    };
    if (!sends.length) {
      // Nothing to send (shed questions with nothing else, their findings sent already): counted all the same.
      sent();
      return undefined;
    }
    return (sends.length === 1 ? sends[0] : Promise.all(sends)).then(sent);
  };
  /**
   * The question tasks handed over, recorded as waiting for their answers: one statement at a
   * time, each taking every task handed over meanwhile, and never awaited by a step. Awaited,
   * every step waited for a database write (embedded, behind the store writer's transactions on
   * PGlite's one connection): receipt to finding at 5,000 spans/s went from p50 3-4 ms and p99
   * 23-37 to p50 18-35 and p99 80-153. The order does not matter (a result recorded first marks
   * its task done, and the task recorded later is left so). At most MAX_HANDED_WAITING wait;
   * past that, what more comes is said and not recorded (the run page counts fewer waiting).
   */
  const handedWriter = (() => {
    let waiting: QuestionTask[] = [];
    let writing: Promise<void> | undefined;
    // Said once each time the bound is passed.
    let saidFull = false;
    const write = (): Promise<void> | undefined => {
      if (writing || !waiting.length) return writing;
      const tasks = waiting;
      waiting = [];
      writing = opts
        .questions!.results!.handed!(tasks.map((t) => ({ task_id: t.id, project: t.project, run_id: t.run_id })))
        .catch((err: unknown) =>
          logFailure(`recording ${tasks.length} question tasks as waiting for their answers failed (the run page counts fewer waiting)`, err, runFields(tasks.map((t) => [t.project, t.run_id]))),
        )
        .finally(() => {
          writing = undefined;
          void write();
        });
      return writing;
    };
    return {
      add(tasks: readonly QuestionTask[]): void {
        if (!tasks.length) return;
        if (waiting.length + tasks.length > MAX_HANDED_WAITING) {
          if (!saidFull) log(`more than ${MAX_HANDED_WAITING} question tasks wait to be recorded as waiting for their answers: the run page counts fewer waiting until the database catches up`);
          saidFull = true;
          return;
        }
        saidFull = false;
        for (const t of tasks) waiting.push(t);
        void write();
      },
      /** What is being written and what waits (the stop). */
      async flush(): Promise<void> {
        while (writing || waiting.length) await (writing ?? write());
      },
    };
  })();
  // Whether the question service is too far behind for a step's questions: the question task
  // records waiting when it is past the bound, else undefined. Read as the step begins: its
  // scheduler then counts none of the step's asks (a shed question is asked again when due).
  const maxQuestionBacklog = opts.questions?.maxBacklog ?? 0;
  const backlogSetting = opts.questions?.maxBacklogSetting ?? 'NEATROOTS_MAX_QUESTION_BACKLOG';
  const questionsBehind = (): number | undefined => {
    if (!opts.questions || !(maxQuestionBacklog > 0) || !opts.bus.backlog) return undefined;
    const waiting = opts.bus.backlog(questionsTopic.name);
    return waiting > maxQuestionBacklog ? waiting : undefined;
  };
  const notAsked = (t: QuestionTask, behind: number): QuestionResult => ({
    // Its own row: the same task may be handed over later (a shed ask is not counted) and fail.
    task_id: `${t.id}-shed`,
    project: t.project,
    run_id: t.run_id,
    check_id: t.check.id,
    anchor: t.anchor,
    span_ids: t.span_ids,
    answer: notChecked(`not asked: the question service was ${behind} question task records behind (${backlogSetting}=${maxQuestionBacklog})`),
    at_ms: t.at_ms,
  });
  let shedSaidAt = 0;
  const saidShed = (n: number, behind: number) => {
    metrics.questionsShed += n;
    if (Date.now() - shedSaidAt >= 60_000) {
      shedSaidAt = Date.now();
      log(`${behind} question task records wait for the question service (past ${maxQuestionBacklog}, ${backlogSetting}): new questions are not asked until it catches up, and are recorded as not checked (${metrics.questionsShed} question tasks not asked so far)`);
    }
  };

  // Publishes what a step raised and calls its saves: returns their promise (the saves are
  // under way; a store that applies at call has already made them, see `atCall`).
  const publish = async (out: EngineOutput, asked?: SchedulerOutput, behind?: number, raisedSent = false): Promise<{ saved: Promise<void> }> => {
    const sent = send(out, asked, behind, raisedSent);
    if (sent) await sent;
    // Windows are saved only once everything they led to is on the bus (the same order for both).
    // The two stores are saved side by side: each is its own journal (its own fsync on the
    // embedded default), and the batch's next step, so the findings of the records that came
    // meanwhile, waited for the two syncs one after the other. Each store is replayed alone
    // after a crash (a span seen is skipped), so which of the two was saved first does not matter.
    return { saved: allSaved([out.commit(), ...(asked ? [asked.commit()] : [])]) };
  };
  const emit = async (out: EngineOutput, asked?: SchedulerOutput) => {
    await (await publish(out, asked)).saved;
  };

  // A batch's next batch need not wait for its window saves to sync when both stores apply a
  // save as it is called (the embedded memory and journal stores: the next step loads what was
  // saved, wakes included) and the bus can hold the position until they are synced
  // (BusBatch.defer, the embedded log): its findings are published as soon as they are
  // evaluated, and the position still moves only past batches whose saves, and those of every
  // batch before them on the partition, are on disk. A crash in between replays the batches
  // after the position against the windows that were synced: a span already applied is
  // skipped, the others raise the same findings (same ids). Redis (compare-and-set: a save is
  // seen only once it returned) and Kafka keep the step waiting for its saves. A tick (no bus
  // position) on such stores lets the batches of its runs go on once its saves are made.
  const atCall = opts.windows.appliedAtCall === true && (!opts.questions || (opts.questions.windows ?? opts.windows).appliedAtCall === true);

  // Batches of different partitions hold different runs (a run is keyed to one partition), so
  // their steps may overlap: one publishes and saves while the next is evaluated. A tick
  // touches the runs whose waits are due: it waits for the batches holding those runs and the
  // batches with those runs wait for it (a step that loaded a window while another was still
  // saving it would be refused by the compare-and-set and read again, but only after a delay).
  const lock = new RunLock();
  // The runs a recording held, in the order first seen, for its end (a key is built only for
  // a run not seen before: by project, the run ids seen).
  const seen = new Map<string, Set<string>>();
  const seenKeys: string[] = [];

  const group = opts.group ?? 'rule-engine';
  // A recording comes many items a batch (a batch step per item cost replay more than the
  // engine), but each item is taken as if it had come alone at its own time: what is due by
  // then fires first, and the questions it led to are answered before the next item, so the
  // findings and their order do not depend on how the recording was cut into batches.
  const recordedStep = async (clock: RecordedClock, envs: readonly Envelope[]) => {
    for (const e of envs) {
      let runs = seen.get(e.project);
      if (!runs) seen.set(e.project, (runs = new Set()));
      const run = itemRunId(e.item);
      if (!runs.has(run)) {
        runs.add(run);
        seenKeys.push(windowKey(e.project, run));
      }
      clock.advance(e.received_ms);
      // As the timer does live: the due wakes first, a tick only when there are some (mostly
      // there are none, and a tick's step costs replay as much as the item).
      const now = clock.now();
      const due = await opts.windows.takeDue(now, 10_000, WAKE_LEASE_MS);
      if (due.length) await emit(await engine.tick(now, { keys: due }));
      const one = [e];
      const out = await engine.process(one);
      const behind = questionsBehind();
      const asked = opts.questions ? await opts.questions.scheduler.process(one, { shed: behind !== undefined }) : undefined;
      // emit's order (sent, then saved), its steps awaited one by one: the recording's stores
      // are in memory, with no syncs to overlap, and emit's gathering (two async calls and the
      // saves' allSettled) cost replay about eight promises an item, as much as the bus's hop.
      const sent = send(out, asked, behind);
      if (sent) await sent;
      await out.commit();
      if (asked) await asked.commit();
      if (asked?.tasks.length) await clock.settle(group);
    }
  };

  const step = (batch: BusBatch<Envelope>) =>
    lock.shared(async () => {
      const envs = batch.records.map((r) => r.value);
      try {
        if (opts.recorded) await recordedStep(opts.recorded, envs);
        else {
          // The engine and the question scheduler each load their windows (on Redis, a round
          // trip each): side by side, not one after the other. Both are settled before either
          // fails the batch, so no step is left running behind its retry.
          const behind = questionsBehind();
          const raised = engine.process(envs);
          const asking = opts.questions?.scheduler.process(envs, { shed: behind !== undefined });
          // The findings and notes go out as soon as the checks are evaluated, not once the
          // scheduler's step on the same batch is done too: on the embedded default both run on
          // the one main thread, and a finding waited for the scheduler's work on its batch
          // (in the latency bench, up to 21 ms of a 27 ms finding at 2,000 spans/s; the batch's
          // windows are still saved only once its question tasks are on the bus as well). If the
          // scheduler then fails, the batch comes again and raises the same findings (same ids).
          const raisedSent = asking ? raised.then((out) => send(out)) : undefined;
          // Handled at once (the checks may fail long before the scheduler's step settles); awaited below.
          raisedSent?.catch(() => undefined);
          // Both steps and that send settled before either fails the batch.
          const [out, asked] = await both(raised, asking).finally(() => raisedSent?.catch(() => undefined));
          await raisedSent;
          const { saved } = await publish(out, asked, behind, raisedSent !== undefined);
          if (atCall && batch.defer) {
            batch.defer(
              saved.catch((err) => {
                logFailure(`the window saves of a batch of ${envs.length} events failed (the bus delivers it again)`, err, runFields(envs.map((e) => [e.project, itemRunId(e.item)])));
                throw err;
              }),
            );
          } else {
            // This bus cannot hold its position for the saves: they are written now.
            checkpointNow();
            await saved;
          }
        }
      } catch (err) {
        // Said here with the runs it held; the bus delivers the batch again.
        logFailure(`a batch of ${envs.length} events failed`, err, runFields(envs.map((e) => [e.project, itemRunId(e.item)])));
        throw err;
      }
      metrics.consumed += envs.length;
      metrics.batches++;
      // A recording's step fires whatever is due, in any run: it holds them all.
    }, opts.recorded ? undefined : batchRuns(batch.records));
  const sub: Subscription = await opts.bus.subscribe(opts.topics.events, { group }, opts.mergeBatches && !opts.recorded ? mergingBatches(step) : step);

  // The tick under way, if any: a stop waits for it (it publishes and saves; the bus closes after).
  let ticking: Promise<void> | undefined;
  const timer = opts.recorded ? undefined : setInterval(() => {
    if (ticking) return;
    // Taking the due wakes needs no lock (it is one atomic step in the store); only a tick that
    // has something to fire holds batches back, and only those with its runs.
    const now = Date.now();
    let due: string[] = [];
    ticking = opts.windows
      .takeDue(now, 10_000, WAKE_LEASE_MS)
      .then(async (taken) => {
        // With the runs an unsaved step left changed a while ago (RuleEngine.unsavedKeys).
        const stale = engine.unsavedKeys(now - (opts.unsavedAfterMs ?? 5_000));
        const keys = stale.length ? [...new Set([...taken, ...stale])] : taken;
        due = keys;
        if (!keys.length) return;
        // The tick holds its runs until it has published and made its saves; on stores that
        // apply at call the batches of those runs go on while the saves sync, elsewhere the
        // runs stay held until the saves are done. Either way the tick ends with its saves.
        const { saved } = await lock.exclusive(async () => {
          const step = await publish(await engine.tick(now, { keys }));
          if (!atCall) await step.saved;
          return step;
        }, keys);
        // With checkpoints the saves are made and wait for the next one: the next tick (other
        // runs' waits) does not wait with them. A failed save leaves the wakes leased: they come round.
        if (coalesced.length) saved.catch((err: unknown) => {
          metrics.errors++;
          log('the window saves of a tick failed (its wakes come round again)', err, runFields(keys.map(runOfWindowKey)));
        });
        else await saved;
      })
      .catch((err) => {
        // Another replica saved the run meanwhile: its wake is leased, so it comes round again.
        if (err instanceof WindowConflictError) return;
        metrics.errors++;
        log('tick failed (will retry)', err, runFields(due.map(runOfWindowKey)));
      })
      .finally(() => (ticking = undefined));
  }, opts.tickMs ?? 50);
  timer?.unref();

  const prechecker = new Prechecker({ windows: opts.windows, rules: opts.rules, steering: opts.steering, quiet: opts.quiet, pollMs: opts.precheckPollMs });
  return {
    engine,
    metrics,
    precheck: (req) => prechecker.precheck(req),
    // No rule halts in a project without steering: none of its calls is to be asked about (nor
    // refused, fail-closed, for a slow answer).
    haltingTools: async (project, workflow) => ((await opts.steering?.(project)) ? haltingTools(opts.rules(), project, workflow) : []),
    end: () => lock.exclusive(async () => emit(await engine.tick(opts.recorded?.now() ?? Date.now(), { keys: [...seenKeys], all: true }))),
    close: async () => {
      clearInterval(timer);
      // A tick begun before the timer stopped publishes and saves: done before the bus closes.
      await ticking;
      // A last step on the runs a failed step left unsaved (the timer's tick would have taken
      // them): it publishes what they raised and saves them. Those it cannot (the step fails
      // again) would hold every earlier save of their runs at the stores' checkpoints, and the
      // subscription's close waits for those saves: they are let go, and their batches come
      // again at the next start.
      // Under every run's lock: the steps under way end first (a step whose commit has not come
      // yet holds its runs in `unsaved` too), so only what failed steps left is taken.
      let stale: string[] = [];
      await lock
        .exclusive(async () => {
          stale = engine.unsavedKeys(Infinity);
          if (!stale.length) return;
          const { saved } = await publish(await engine.tick(Date.now(), { keys: stale }));
          // With checkpoints the saves wait for the next one, which the subscription's close waits for.
          if (!atCall) await saved;
          else saved.catch(() => undefined);
        })
        .catch((err: unknown) => log("the last tick before the stop failed: its runs' batches come again at the next start", err, runFields(stale.map(runOfWindowKey))));
      if (stale.length) {
        let released = 0;
        for (const s of coalesced) released += s.releaseBusy?.() ?? 0;
        if (released) log(`${released} windows left unsaved by a failed step are not journaled at the stop: their batches come again at the next start`, undefined, runFields(stale.map(runOfWindowKey)));
      }
      await sub.close();
      await handedWriter.flush();
    },
  };
}

/** Question tasks waiting to be recorded as handed over at most (the run page's questions_pending). */
const MAX_HANDED_WAITING = 100_000;

/** A log line's project and run: the run when there is one, else how many. */
function runFields(runs: readonly (readonly [string, string])[]): LogFields {
  const distinct = new Set(runs.map(([p, r]) => windowKey(p, r)));
  if (distinct.size === 1) return { project: runs[0][0], run_id: runs[0][1] };
  const projects = new Set(runs.map(([p]) => p));
  return projects.size === 1 ? { project: runs[0][0], runs: distinct.size } : { runs: distinct.size };
}

/** A run window's key (windowKey: project and run id joined by NUL) as its project and run. */
function runOfWindowKey(key: string): [string, string] {
  const i = key.indexOf('\u0000');
  return i < 0 ? ['', key] : [key.slice(0, i), key.slice(i + 1)];
}

/** Both results, once both are settled; the first failure is thrown. */
async function both<A, B>(a: Promise<A>, b: Promise<B> | undefined): Promise<[A, B | undefined]> {
  if (!b) return [await a, undefined];
  const [ra, rb] = await Promise.allSettled([a, b]);
  if (ra.status === 'rejected') throw ra.reason;
  if (rb.status === 'rejected') throw rb.reason;
  return [ra.value, rb.value];
}

/** Waits for every save, then throws the first failure (none is left running behind a retry). */
function allSaved(saves: Promise<void>[]): Promise<void> {
  // One save (no question scheduler) is its own promise.
  if (saves.length === 1) return saves[0];
  return Promise.allSettled(saves).then((all) => {
    const failed = all.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
}

/** How long a taken wake waits before it is offered again if its tick never saved. */
const WAKE_LEASE_MS = 5_000;

/** The runs a batch carries (window keys). */
function batchRuns(records: readonly { value: Envelope }[]): string[] {
  const keys = new Set<string>();
  for (const r of records) keys.add(windowKey(r.value.project, itemRunId(r.value.item)));
  return [...keys];
}

/**
 * Shared for batch steps, exclusive for ticks, per run: steps on other runs go on side by side
 * (a tick no longer waits for every batch in hand and their syncs, nor holds every batch back
 * while it publishes and syncs: findings of other runs were held behind it). On the same run a
 * waiting tick goes before new batches. No runs given: every run (a recording's steps, its end).
 */
class RunLock {
  private readonly held = new Map<string, number>();
  private readonly sole = new Set<string>();
  private readonly wanted = new Map<string, number>();
  private heldAll = 0;
  private soleAll = false;
  private wantedAll = 0;
  private waiters: (() => void)[] = [];

  private wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private canShare(runs: readonly string[] | undefined): boolean {
    if (this.soleAll || this.wantedAll > 0) return false;
    if (!runs) return this.sole.size === 0 && this.wanted.size === 0;
    return !runs.some((k) => this.sole.has(k) || this.wanted.has(k));
  }

  private canHoldAlone(runs: readonly string[] | undefined): boolean {
    if (this.soleAll || this.heldAll > 0) return false;
    if (!runs) return this.held.size === 0 && this.sole.size === 0;
    return !runs.some((k) => this.held.has(k) || this.sole.has(k));
  }

  async shared<T>(fn: () => Promise<T>, runs?: readonly string[]): Promise<T> {
    while (!this.canShare(runs)) await this.wait();
    if (runs) for (const k of runs) this.held.set(k, (this.held.get(k) ?? 0) + 1);
    else this.heldAll++;
    try {
      return await fn();
    } finally {
      if (runs) for (const k of runs) count(this.held, k, -1);
      else this.heldAll--;
      this.wake();
    }
  }

  async exclusive<T>(fn: () => Promise<T>, runs?: readonly string[]): Promise<T> {
    if (runs) for (const k of runs) count(this.wanted, k, 1);
    else this.wantedAll++;
    while (!this.canHoldAlone(runs)) await this.wait();
    if (runs) for (const k of runs) count(this.wanted, k, -1);
    else this.wantedAll--;
    if (runs) for (const k of runs) this.sole.add(k);
    else this.soleAll = true;
    try {
      return await fn();
    } finally {
      if (runs) for (const k of runs) this.sole.delete(k);
      else this.soleAll = false;
      this.wake();
    }
  }
}

function count(m: Map<string, number>, k: string, by: number): void {
  const n = (m.get(k) ?? 0) + by;
  if (n > 0) m.set(k, n);
  else m.delete(k);
}
