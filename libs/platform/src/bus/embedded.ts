import * as path from 'node:path';
import { RepeatedErrors, type Bus } from '@neatroots/ports';
import type { Config } from '../config';
import { LogBus } from './log';
import { MemoryBus } from './memory';

/**
 * The embedded deployment's bus, as configured: the durable log in the data folder
 * (NEATROOTS_BUS=log, the default) or the in-memory bus. Both have backlog() and idle().
 */
export type EmbeddedBus = Bus & {
  backlog(topic: string): number;
  idle(): Promise<void>;
  close(): Promise<void>;
  /** Why the log cannot be written until the process starts again (a disk error), or undefined. */
  failure?(): string | undefined;
};

export interface EmbeddedBusLog {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, err?: unknown): void;
}

export function logDir(config: Config): string {
  return path.join(config.dataDir, 'bus');
}

export function openEmbeddedBus(config: Config, log: EmbeddedBusLog): EmbeddedBus {
  // A batch retried while its store is down (or the disk full) fails alike every try.
  const repeats = new RepeatedErrors();
  const common = {
    onError: (err: unknown, topic: string, group: string) => {
      const more = repeats.quieted(`${topic}/${group}`, err);
      if (more === undefined) return;
      // The log's own bookkeeping (saving the groups' positions, the last sync at close) is no batch.
      // A batch failed by the stop itself (the question service closed its model queues): the stop's lines say what is left.
      if ((err as { name?: unknown } | undefined)?.name === 'ModelQueueClosedError') return;
      const what = topic === '(log)' ? `bus log (${group.replace(/[()]/g, '')})` : `bus ${topic}/${group}: batch failed, retrying`;
      log.error(`${what}${more}`, err);
    },
    setAside: { attempts: config.NEATROOTS_BUS_ATTEMPTS },
    deadLetterPrefix: config.NEATROOTS_TOPIC_PREFIX,
  };
  if (config.NEATROOTS_BUS === 'memory') return new MemoryBus(common);
  // Only what ingest acknowledges waits for the sync; what the pipeline raises from it is made
  // durable by the sync before each saved position (see LogBus).
  const events = `${config.NEATROOTS_TOPIC_PREFIX}.events`;
  const deflate = config.NEATROOTS_LOG_COMPRESSION === 'deflate';
  const bus = new LogBus({
    dir: logDir(config), ...common, pack: config.NEATROOTS_BUS_PACK === 'on', syncTopics: (topic) => topic === events, compress: () => deflate,
  });
  const r = bus.recovery;
  for (const d of r.damage) log.warn(`bus log: ${d} (cut off: it was never acknowledged)`);
  if (r.pending) log.info(`bus log: ${r.pending} records accepted before the last stop were not processed yet; processing them now`);
  return bus;
}

/** The least a stop waits for the batches in hand once the drain time is over. */
const IN_HAND_MS = 5_000;

/** Whether `p` settled within `ms` (the timer does not keep the process up). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    p.then(() => true),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  return settled;
}

/**
 * On a stop, once ingest stopped accepting: lets what was accepted be processed, for at most
 * NEATROOTS_DRAIN_MS. Whatever is left stays in the log (durable) and is processed at the next
 * start; the line says how much, and where.
 */
export async function drainEmbeddedBus(bus: EmbeddedBus, config: Config, topic: string, log: EmbeddedBusLog, failing?: string): Promise<void> {
  const ms = config.NEATROOTS_DRAIN_MS;
  // A part that stopped at a disk error (Platform.failing): what the pipeline would do now cannot
  // be saved, so the drain time would be waited out for nothing. The log keeps what is left.
  if (failing && bus instanceof LogBus) {
    log.warn(`stop: no drain (${failing}): the ${bus.backlog(topic)} accepted records not processed yet stay durable in ${logDir(config)} for the next start`);
    return;
  }
  if (await settlesWithin(bus.idle(), ms)) return;
  // The batches in hand end and no others start, so the count said is what the next start takes
  // up (the services still stopping would otherwise go on consuming it). A batch whose handler
  // waits on a dependency that keeps failing (a full disk under the database) may not end: it is
  // waited for as long again (at least IN_HAND_MS), then the services' own stops (next) end its
  // retries; what it held was not processed and stays in the log.
  if (bus instanceof LogBus) {
    const more = Math.max(ms, IN_HAND_MS);
    if (!(await settlesWithin(bus.stopDelivering(), more))) {
      log.warn(
        `stop: batches in hand not done after ${more} ms more (waiting on a slow model's answers, or retrying a dependency that keeps failing if errors are above): they end as their services stop (what waits on the model fails), and their records stay durable in ${logDir(config)} for the next start`,
      );
    }
  }
  const left = bus.backlog(topic);
  if (left === 0) return; // the batches in hand were the last
  if (bus instanceof LogBus) {
    log.warn(`stop: drained for ${ms} ms (NEATROOTS_DRAIN_MS); ${left} accepted records not processed yet stay durable in ${logDir(config)} and are processed at the next start`);
  } else {
    log.error(`stop: drained for ${ms} ms (NEATROOTS_DRAIN_MS); ${left} accepted records not processed yet are LOST (NEATROOTS_BUS=memory keeps nothing)`);
  }
}
