import { deadLetterTopic, isInfrastructureError, type Bus, type BusBatch, type BusRecord, type DeadLetter, type DeadLetterSink, type Topic } from '@neatroots/ports';

/**
 * Bounded retries, then set aside: what every bus driver (MemoryBus, KafkaBus, LogBus) does
 * with a batch whose handler throws, so that one message no handler can take never holds up
 * everything behind it on its partition.
 *
 * - The batch is tried `attempts` times. Then its records are tried one at a time, in order;
 *   a record that still throws after `attempts` tries alone is set aside (a DeadLetter with
 *   the last error, to the sink) and the next one is handled.
 * - An error that says the infrastructure is at fault (connection refused, timeouts, a
 *   database or broker that is down; or a RetryLaterError from the handler) is never blamed
 *   on the message: it is rethrown at once and the driver reads the batch again later, as
 *   long as it takes. Nothing is set aside because a dependency was down.
 * - While the subscription is closing, waits end and the batch fails instead: it is not
 *   committed, and whoever reads the partition next takes it again.
 *
 * Handlers are idempotent (at-least-once), so records of a batch handled before one of them
 * is set aside may be handled again without harm.
 */
export interface SetAsideOptions {
  /** Tries of a failing batch, and then of each of its records alone. Default 3 (NEATROOTS_BUS_ATTEMPTS). */
  attempts?: number;
  /** Wait between tries, ms. Default 200. */
  retryDelayMs?: number;
  /** Told of every set-aside record (metrics, logs). */
  onSetAside?: (letter: DeadLetter) => void;
}

// Which errors say a dependency is down lives in @neatroots/ports, where the services that answer
// over gRPC read it too (review answers UNAVAILABLE for them); re-exported here where it always was.
export { isInfrastructureError, RetryLaterError } from '@neatroots/ports';

type Obj = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

/** A record's dead letter: project, run and id read from the shapes the topics carry. */
export function letterOfRecord(record: BusRecord<unknown>, where: { topic: string; group: string }, err: unknown): DeadLetter {
  const v = (record.value && typeof record.value === 'object' ? record.value : {}) as Obj;
  const item = (v.item && typeof v.item === 'object' ? v.item : undefined) as Obj | undefined;
  const inner = (item?.span ?? item?.run) as Obj | undefined;
  const letter: DeadLetter = {
    project: str(v.project) ?? '',
    source: `bus:${where.topic}/${where.group}`,
    kind: str(item?.kind) ?? 'message',
    reason: (err as Error)?.message ?? String(err),
    payload: record.value,
  };
  const run = str(v.run_id) ?? str(inner?.run_id) ?? (record.key || undefined);
  if (run) letter.run_id = run;
  const id = str(v.id) ?? str(inner?.span_id) ?? str(v.finding_id);
  if (id) letter.item_id = id;
  return letter;
}

export interface GuardContext {
  topic: string;
  group: string;
  /** Where set-aside records go; without one (the dead-letter topic's own consumer) they are reported and skipped. */
  sink?: DeadLetterSink;
  /** The subscription is closing: stop waiting, fail the batch. */
  stopping: () => boolean;
  /** Told of every failed try. */
  onError: (err: unknown) => void;
}

/** The handler a driver calls: `handler` with bounded retries, then records set aside. */
export function withSetAside<T>(
  handler: (batch: BusBatch<T>) => Promise<void>,
  ctx: GuardContext,
  opts: SetAsideOptions = {},
): (batch: BusBatch<T>) => Promise<void> {
  const attempts = Math.max(1, opts.attempts ?? 3);
  const delay = opts.retryDelayMs ?? 200;

  const pause = async (): Promise<void> => {
    const end = Date.now() + delay;
    while (!ctx.stopping() && Date.now() < end) await new Promise((r) => setTimeout(r, Math.min(50, end - Date.now())));
  };

  /** A failed try: told, rethrown when not the message's fault, else a pause before the next (if any). */
  const failed = async (err: unknown, a: number): Promise<void> => {
    ctx.onError(err);
    if (isInfrastructureError(err) || ctx.stopping()) throw err;
    if (a < attempts) await pause();
  };

  /** Tries `batch` from try `from` up to `attempts`; returns the last error, or undefined once it worked. */
  const tryAll = async (batch: BusBatch<T>, from = 1, last?: unknown): Promise<unknown> => {
    for (let a = from; a <= attempts; a++) {
      try {
        await handler(batch);
        return undefined;
      } catch (err) {
        last = err;
        await failed(err, a);
      }
    }
    return last ?? new Error('handler failed');
  };

  const setAside = async (record: BusRecord<T>, err: unknown): Promise<void> => {
    const letter = letterOfRecord(record, ctx, err);
    if (ctx.sink) await ctx.sink.setAside([letter]);
    opts.onSetAside?.(letter);
  };

  /** After the batch's first try failed: the other tries, then its records alone. */
  const retried = async (batch: BusBatch<T>, first: unknown): Promise<void> => {
    await failed(first, 1);
    const err = await tryAll(batch, 2, first);
    if (err === undefined) return;
    if (batch.records.length === 1) return setAside(batch.records[0], err);
    for (const record of batch.records) {
      const one = await tryAll({ ...batch, records: [record] });
      if (one !== undefined) await setAside(record, one);
    }
  };

  // The first try is the handler's own promise (nearly every batch works at once): the retry
  // machinery's frames cost every delivery two promises, and replay delivers one a question.
  return (batch) => {
    let first: Promise<void>;
    try {
      first = handler(batch);
    } catch (err) {
      return retried(batch, err);
    }
    return first.then(undefined, (err: unknown) => retried(batch, err));
  };
}

/** The bus options every driver takes for this (MemoryBusOptions, KafkaBusOptions, LogBusOptions). */
export interface DeadLetterBusOptions {
  /** Bounded retries and what to tell of set-aside records. */
  setAside?: SetAsideOptions;
  /** Dead letters are published to `<prefix>.dead-letters` (the review service stores them). Default `neatroots`. */
  deadLetterPrefix?: string;
}

/** A sink that publishes dead letters on the bus, keyed by run (or project). */
export function busDeadLetterSink(bus: Pick<Bus, 'publish'>, topic: Topic<DeadLetter>): DeadLetterSink {
  return { setAside: (letters) => bus.publish(topic, letters.map((l) => ({ key: l.run_id ?? l.project, value: l }))) };
}

/**
 * What a driver's subscribe() hands its delivery loop instead of the handler: the handler
 * with bounded retries, setting aside to the bus's dead-letter topic. The dead-letter topic's
 * own consumer has no sink (a dead letter that cannot be stored is reported, not looped).
 */
export function guardHandler<T>(
  bus: Pick<Bus, 'publish'>,
  handler: (batch: BusBatch<T>) => Promise<void>,
  where: { topic: string; group: string; stopping: () => boolean; onError: (err: unknown) => void },
  opts: DeadLetterBusOptions & { counted?: () => void },
): (batch: BusBatch<T>) => Promise<void> {
  const dl = deadLetterTopic(opts.deadLetterPrefix);
  return withSetAside(
    handler,
    { ...where, sink: where.topic === dl.name ? undefined : busDeadLetterSink(bus, dl) },
    {
      ...opts.setAside,
      onSetAside: (letter) => {
        opts.counted?.();
        opts.setAside?.onSetAside?.(letter);
      },
    },
  );
}
