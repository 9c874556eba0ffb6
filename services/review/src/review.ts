import { deadLetterTopic, RepeatedErrors, type Bus, type BusBatch, type DeadLetter, type Db, type LogFields, type Subscription, type Topic } from '@neatroots/ports';
import { notChecked, type QuestionResult } from '@neatroots/questions';
import {
  DeadLettersRepo, QuestionsRepo, QuietChecks, StoreWriter, type IsQuiet, type QuietChecksOptions, type ReviewQueries, type StoreWriterOptions,
} from '@neatroots/store';
import { DELIVERIES_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC, type FindingMessage, type NoteDelivered } from '@neatroots/messages';
import { type Envelope } from '@neatroots/spans';
import { createReviewQueries } from './queries';

export interface ReviewTopics {
  events: Topic<Envelope>;
  findings: Topic<FindingMessage>;
  deliveries: Topic<NoteDelivered>;
  /** What the bus drivers set aside (default `neatroots.dead-letters`; deadLetterTopic(prefix) for another prefix). */
  deadLetters: Topic<DeadLetter>;
}

/** Consumer groups: each sees every message of its topic; replicas of the service share them. */
export const REVIEW_GROUPS = {
  events: 'review-store',
  findings: 'review-findings',
  deliveries: 'review-deliveries',
  deadLetters: 'review-dead-letters',
} as const;

export interface ReviewOptions {
  bus: Bus;
  /** Migrated already (`migrate(db)` from @neatroots/platform). */
  db: Db;
  /** The topics of @neatroots/spans by default (another prefix: makeTopics(prefix)). */
  topics?: Partial<ReviewTopics>;
  writer?: StoreWriterOptions;
  quiet?: QuietChecksOptions;
  /** Where new consumer groups start (default: the earliest kept message). */
  fromBeginning?: boolean;
  /** How long close() lets the batches in hand finish before closing the writer. */
  closeGraceMs?: number;
  /** Heartbeat interval while a batch waits for its flush (a slow or retrying database). */
  heartbeatMs?: number;
  /** Lines about a run carry its `project` and `run_id` in `fields`. */
  log?: (msg: string, err?: unknown, fields?: LogFields) => void;
  /** Told of every item set aside in dead_letters, by the writer or from the bus (metrics). */
  onSetAside?: (letter: DeadLetter) => void;
  /**
   * Runs that ended in a batch of events, once the batch is stored (so a run's spans are
   * there to read). A rejection fails the batch, which the bus delivers again.
   */
  onRunsEnded?: (ended: { project: string; run_id: string }[]) => Promise<void>;
}

export interface Review {
  queries: ReviewQueries;
  /** Quiet checks per project, for the rule engine's `quiet` option. */
  quiet: QuietChecks;
  isQuiet: IsQuiet;
  writer: StoreWriter;
  /** Stops consuming (the batches in hand finish and are committed), flushes, returns. */
  /**
   * Stops taking batches and flushes. `graceMs`: how long the batches in hand may wait for their
   * flush before the writer is closed anyway (default closeGraceMs); 0 once nothing can be saved
   * (the process is failing: a full disk).
   */
  close(opts?: { graceMs?: number }): Promise<void>;
}

/**
 * The review service: stores runs and spans (events topic), findings (findings topic) and
 * deliveries (deliveries topic: a note reached the agent, the finding becomes active). Each
 * handler resolves only once its batch is committed to the database, so the bus moves the
 * offset after the data is safe; a redelivered batch changes nothing (the writes are
 * idempotent). Writes from all three consumers share the StoreWriter's batches.
 */
export async function startReview(opts: ReviewOptions): Promise<Review> {
  const log = opts.log ?? ((msg, err, fields) => console.error(`review: ${msg}`, err ?? '', fields ?? ''));
  const topics: ReviewTopics = {
    events: opts.topics?.events ?? EVENTS_TOPIC,
    findings: opts.topics?.findings ?? FINDINGS_TOPIC,
    deliveries: opts.topics?.deliveries ?? DELIVERIES_TOPIC,
    deadLetters: opts.topics?.deadLetters ?? deadLetterTopic(),
  };
  const told = (letters: readonly DeadLetter[]): void => {
    for (const l of letters) {
      const fields: LogFields = { project: l.project, ...(l.run_id ? { run_id: l.run_id } : {}), kind: l.kind, source: l.source };
      log(`set aside ${l.kind} ${l.item_id ?? ''} of project "${l.project}" (${l.source}): ${l.reason}`, undefined, fields);
      opts.onSetAside?.(l);
    }
  };
  const repeats = new RepeatedErrors();
  const writer = new StoreWriter(opts.db, {
    onError: (err, info) => {
      // Retried while the database is down or its disk full: alike each try.
      const more = repeats.quieted('store', err);
      if (more !== undefined) log(`storing ${info.items} items failed (attempt ${info.attempt}); retrying${more}`, err);
    },
    onSetAside: told,
    ...opts.writer,
  });
  const deadLetters = new DeadLettersRepo(opts.db);
  const questions = new QuestionsRepo(opts.db);
  const quiet = new QuietChecks(opts.db, opts.quiet);
  const queries = createReviewQueries(opts.db, { quiet });
  const heartbeatMs = opts.heartbeatMs ?? 3_000;

  /** Waits for `write`, heartbeating meanwhile so the group keeps this consumer. */
  const stored = async (batch: BusBatch<unknown>, write: Promise<void>): Promise<void> => {
    const timer = setInterval(() => {
      batch.heartbeat().catch((err) => log('heartbeat failed', err));
    }, heartbeatMs);
    try {
      await write;
    } finally {
      clearInterval(timer);
    }
  };

  const subs: Subscription[] = [];
  const sub = { fromBeginning: opts.fromBeginning };
  try {
    subs.push(await opts.bus.subscribe(topics.events, { group: REVIEW_GROUPS.events, ...sub }, async (batch) => {
      const events = batch.records.map((r) => r.value);
      await stored(batch, writer.writeEvents(events));
      if (!opts.onRunsEnded) return;
      const ended = events.flatMap((e) => (e.item.kind === 'run_end' ? [{ project: e.project, run_id: e.item.run.run_id }] : []));
      if (ended.length) await opts.onRunsEnded(ended);
    }));
    subs.push(await opts.bus.subscribe(topics.findings, { group: REVIEW_GROUPS.findings, ...sub }, (batch) =>
      stored(batch, writer.writeFindings(batch.records.map((r) => r.value)))));
    subs.push(await opts.bus.subscribe(topics.deliveries, { group: REVIEW_GROUPS.deliveries, ...sub }, (batch) =>
      stored(batch, writer.writeDeliveries(batch.records.map((r) => r.value)))));
    // What the bus drivers set aside (a rule engine or question handler that kept throwing).
    subs.push(await opts.bus.subscribe(topics.deadLetters, { group: REVIEW_GROUPS.deadLetters, ...sub }, async (batch) => {
      const letters = batch.records.map((r) => r.value).map(withTasksProject);
      await deadLetters.setAside(letters);
      // A question record set aside will not be answered: its questions are recorded as not
      // checked, with why (never a pass), which ends their wait (the run page's questions_pending).
      const given = letters.flatMap(givenUpQuestions);
      if (given.length) await questions.givenUp(given);
      told(letters);
    }));
  } catch (err) {
    await Promise.allSettled(subs.map((s) => s.close()));
    await writer.close().catch(() => undefined);
    throw err;
  }

  let closing: Promise<void> | undefined;
  const close = (how: { graceMs?: number } = {}): Promise<void> => {
    closing ??= (async () => {
      // Stop taking batches; the ones in hand wait for their flush. If the database is down
      // they would wait forever, so after the grace the writer is closed anyway: its last
      // attempts fail, those handlers reject, and their offsets stay where they were.
      const subsClosed = Promise.allSettled(subs.map((s) => s.close()));
      let grace: NodeJS.Timeout | undefined;
      await Promise.race([subsClosed, new Promise<void>((r) => (grace = setTimeout(r, how.graceMs ?? opts.closeGraceMs ?? 10_000)))]);
      clearTimeout(grace);
      try {
        await writer.close();
      } finally {
        await subsClosed;
      }
    })();
    return closing;
  };

  return { queries, quiet, isQuiet: quiet.lookup, writer, close };
}

/**
 * A set-aside record of the questions topic (`bus:<prefix>.questions/<group>`) whose tasks it
 * carries: from its payload, or when that was cut to travel, from the short fields of its tasks
 * the letter kept (DeadLetter.payload_items: ids, project, run, anchor, span ids, the check's id).
 */
function questionTasksOf(l: DeadLetter): Record<string, unknown>[] {
  if (!/^bus:.+\.questions\//.test(l.source)) return [];
  const tasks: unknown = Array.isArray(l.payload) ? l.payload : l.payload_items;
  if (!Array.isArray(tasks)) return [];
  return (tasks as unknown[]).filter((t): t is Record<string, unknown> => !!t && typeof t === 'object' && !Array.isArray(t));
}

/**
 * A question record's letter names no project (its value is a list of tasks, each with its
 * own): it takes its tasks', so the project's dead letters list it.
 */
function withTasksProject(l: DeadLetter): DeadLetter {
  if (l.project) return l;
  const project = questionTasksOf(l).find((t) => typeof t.project === 'string' && t.project)?.project;
  return typeof project === 'string' ? { ...l, project } : l;
}

/**
 * The question tasks of a set-aside record as not checked: the question service kept failing on
 * them (a payload cut to travel names them by the short fields kept, payload_items; tasks left
 * out of those, past their room, are left waiting).
 */
function givenUpQuestions(l: DeadLetter): QuestionResult[] {
  const out: QuestionResult[] = [];
  for (const t of questionTasksOf(l)) {
    const check = t.check as { id?: unknown } | undefined;
    if (t.type !== 'question' || typeof t.id !== 'string' || typeof t.project !== 'string' || typeof t.run_id !== 'string' || typeof check?.id !== 'string') continue;
    out.push({
      task_id: t.id,
      project: t.project,
      run_id: t.run_id,
      check_id: check.id,
      anchor: typeof t.anchor === 'string' ? t.anchor : 'run',
      span_ids: Array.isArray(t.span_ids) ? t.span_ids.filter((s): s is string => typeof s === 'string') : [],
      answer: notChecked(`the question service set this question aside after repeated failures: ${l.reason}`.slice(0, 500)),
      at_ms: typeof t.at_ms === 'number' ? t.at_ms : Date.now(),
    });
  }
  return out;
}
