import type { BusBatch } from './bus';

type Handler<T> = (batch: BusBatch<T>) => Promise<void>;

interface Member<T> {
  batch: BusBatch<T>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Takes the batches a bus hands over at the same time as one: the handler is called once with
 * the records of all of them, in place of once per batch.
 *
 * Both buses deliver a topic's partitions side by side (kafkajs the partitions of one fetch,
 * the embedded log each partition's loop), so at a steady, modest rate a consumer gets several
 * small batches at once, one per partition, and pays a step's fixed costs (its windows read and
 * written, a publish, its offsets) for each. Taken together, a step serves them all: at 500
 * spans/s in the distributed bench the rule engine's batches held eight spans each.
 *
 * - Batches that arrive before the next turn of the event loop (the same fetch) go together; a
 *   batch that comes later starts the next group, which may run beside the one in hand (as
 *   batches of different partitions did before). Each keeps its own position: each resolves
 *   (and its bus moves its offset) when the step that held it did.
 * - The records keep their order within each batch (a key is on one partition: its records are
 *   in order). `partition` is the first batch's; `heartbeat` beats for all of them.
 * - `defer` is offered when every batch offers it, and handed to each once the step returned.
 * - If the step fails, each batch is handled again on its own, so a record that fails only
 *   fails its own batch (and the bus's set-aside finds it) rather than every partition beside it.
 */
export function mergingBatches<T>(handler: Handler<T>): Handler<T> {
  let gathering: Member<T>[] | undefined;

  const alone = async (m: Member<T>): Promise<void> => {
    try {
      await handler(m.batch);
      m.resolve();
    } catch (err) {
      m.reject(err);
    }
  };

  const run = async (members: Member<T>[]): Promise<void> => {
    if (members.length === 1) return alone(members[0]);
    const deferred: Promise<void>[] = [];
    const merged: BusBatch<T> = {
      topic: members[0].batch.topic,
      partition: members[0].batch.partition,
      records: members.flatMap((m) => m.batch.records),
      heartbeat: async () => {
        await Promise.all(members.map((m) => m.batch.heartbeat()));
      },
      ...(members.every((m) => m.batch.defer) ? { defer: (stored: Promise<void>) => void deferred.push(stored) } : {}),
    };
    try {
      await handler(merged);
    } catch {
      // Which batch holds the fault is not known: each on its own, as if never merged. What
      // the failed step published is published again with the same ids.
      await Promise.all(members.map(alone));
      return;
    }
    for (const m of members) {
      for (const stored of deferred) m.batch.defer!(stored);
      m.resolve();
    }
  };

  return (batch) =>
    new Promise<void>((resolve, reject) => {
      if (!gathering) {
        gathering = [];
        setImmediate(() => {
          const members = gathering!;
          gathering = undefined;
          void run(members);
        });
      }
      gathering.push({ batch, resolve, reject });
    });
}
