import * as fs from 'node:fs';
import * as path from 'node:path';
import { RepeatedErrors, type Bus, type Db, type Driver, type FailedJob, type Jobs, type Logger, type Platform, type RetriedJob, type WindowStore, type WindowStoreOptions } from '@neatroots/ports';
import { BullJobs } from '../jobs/bullmq';
import { InlineJobs, type StoppedJob } from '../jobs/inline';
import { DEFAULT_MAX_RECORD_BYTES, KafkaBus, recordBytesFor } from '../bus/kafka';
import { drainEmbeddedBus, openEmbeddedBus, type EmbeddedBus } from '../bus/embedded';
import type { Config } from '../config';
import { checkPostgresVersion, migrate, MIGRATE_LOCK, MIN_POSTGRES_VERSION, openPgliteWorker, openPostgres, type Analysis } from '../db';
import type { Metrics } from '../ops';
import { lockFolder } from '../folder-lock';
import { warnWhileSlow } from './log';
import { JournalWindowStore } from '../windows/journal';
import { MemoryWindowStore } from '../windows/memory';
import { openRedisWindowStore } from '../windows/redis';
import { RedisSharedCache } from '../cache/redis';
import { DbSharedCache } from '../cache/db';
import { FailFastRedis } from '../redis-client';

/** Opens each driver once, on first use, and closes what was opened in reverse order. */
class Drivers {
  private readonly closers: { key: string; close: () => Promise<void> }[] = [];
  private readonly once = new Map<string, Promise<unknown>>();

  get<T>(key: string, open: () => Promise<T>, close: (v: T) => Promise<void>): Promise<T> {
    let p = this.once.get(key) as Promise<T> | undefined;
    if (!p) {
      p = open();
      this.once.set(key, p);
      p.then((v) => this.closers.push({ key, close: () => close(v) }), () => this.once.delete(key));
    }
    return p;
  }

  /** The driver opened under `key`, or undefined when it was never asked for (or failed to open). */
  opened<T>(key: string): Promise<T> | undefined {
    return this.once.get(key) as Promise<T> | undefined;
  }

  async close(log: Logger): Promise<void> {
    for (const c of this.closers.splice(0).reverse()) {
      try {
        await warnWhileSlow(log, `closing ${c.key}`, c.close);
      } catch (err) {
        log.error(`closing ${c.key} failed`, err);
      }
    }
  }
}

export interface EmbeddedPlatformOptions {
  config: Config;
  log: Logger;
  /** PGlite in memory instead of the data folder (tests). */
  inMemoryDb?: boolean;
  /** The topic whose records left unprocessed a stop reports (the events topic). */
  drainTopic: string;
}

/**
 * Everything in this process, nothing to install: the in-process bus (a durable log) in place of Kafka,
 * windows in memory with a journal in the data folder in place of Redis, PGlite (the same migrations, on its own thread so
 * storing spans never slows checking them) in place of a Postgres server.
 */
export interface EmbeddedPlatform extends Platform {
  bus(): EmbeddedBus;
}

export function embeddedPlatform(opts: EmbeddedPlatformOptions): EmbeddedPlatform {
  const { config, log } = opts;
  // The data folder is this process's before anything in it is opened: PGlite lets a second
  // process open the database a first one runs, and what the second writes at its start damages
  // it for the first (a second `neatroots start` left the first one's database unopenable).
  fs.mkdirSync(config.dataDir, { recursive: true });
  const unlockData = lockFolder(config.dataDir, `the data folder ${config.dataDir}`);
  const drivers = new Drivers();
  let bus: EmbeddedBus | undefined;
  /** The window journals opened: a disk error stops one until the next start (failing()). */
  const journals: JournalWindowStore<unknown>[] = [];
  /** The database once opened: its thread dying, or a failed sync of its log, stops it for good. */
  let opened: Db | undefined;
  const failing = () => bus?.failure?.() ?? journals.map((j) => j.failure()).find((why) => why !== undefined) ?? opened?.failure?.();
  /** An analysis of the embedded database's tables done: at debug, at warn when one table held it over 2 s. */
  const analyzed = (a: Analysis) => {
    const fields = { why: a.why, tables: a.analyzed, ms: a.ms, longest: a.longest?.table, longest_ms: a.longest?.ms, ...(a.stopped ? { stopped: true } : {}) };
    if ((a.longest?.ms ?? 0) > 2_000) log.warn('database analysis held storage over 2 s for one table', fields);
    else log.debug('database analyzed', fields);
  };
  /** What opening the database does before it is handed out (migrating it): /readyz says it meanwhile. */
  let migrating: string | undefined;
  const db = () =>
    drivers.get<Db>(
      'db',
      async () => {
        if (!opts.inMemoryDb) fs.mkdirSync(config.dataDir, { recursive: true });
        const d = await openPgliteWorker({
          ...(opts.inMemoryDb
            ? {}
            : {
                dataDir: path.join(config.dataDir, 'pg'),
                checkpointWalBytes: config.NEATROOTS_DB_CHECKPOINT_MB * 1024 * 1024,
                onCheckpoint: (c) => {
                  const fields = { wal_mb: Math.round(c.walBytes / 2 ** 20), ms: Math.round(c.ms) };
                  if (c.ms > 2_000) log.warn('database checkpoint held storage over 2 s', fields);
                  else log.debug('database checkpoint', fields);
                },
                onCheckpointError: (err) => log.error('database checkpoint failed (tried again at the next look)', err),
              }),
          analyze: { onAnalyze: analyzed, onAnalyzeError: (err) => log.error('database analysis failed (tried again at the next look)', err) },
        });
        opened = d;
        await migrated(d, log, (what) => (migrating = what));
        // PGlite has no autovacuum: the tables' statistics, in the background (each table in turn
        // with the other calls), then again as they change (AnalyzeOptions).
        d.analyze().then(analyzed, (err: unknown) => log.error('database analysis failed (tried again at the next look)', err));
        return d;
      },
      (d) => d.close(),
    );
  return {
    kind: 'embedded',
    // The durable log in the data folder, or the in-memory bus (NEATROOTS_BUS).
    bus: () => (bus ??= openEmbeddedBus(config, log)),
    // At most NEATROOTS_MAX_WINDOWS in memory, of them NEATROOTS_MAX_ENDED_WINDOWS of ended runs;
    // the least recently used and the longest ended wait in a file of the data folder. Journaled (NEATROOTS_WINDOWS): saves synced before the bus position moves (the rule
    // engine's at its checkpoints: WindowStore.coalesce, NEATROOTS_WINDOW_CHECKPOINT_MS).
    windows: async <W>(name: string) => {
      const dir = path.join(config.dataDir, 'windows');
      const file = name.replace(/[^\w-]/g, '') || 'runs';
      // One store per journal file in the process (two would write over each other), closed with the platform.
      if (config.NEATROOTS_WINDOWS === 'journal')
        return drivers.get<WindowStore<W>>(
          `windows:${file}`,
          async () => {
            const w = JournalWindowStore.open<W>({ dir, name: file, maxWindows: config.NEATROOTS_MAX_WINDOWS, maxResting: config.NEATROOTS_MAX_ENDED_WINDOWS });
            journals.push(w as JournalWindowStore<unknown>);
            const torn = w.stats.tornBytes;
            if (torn) log.warn(`window journal: ${torn} bytes at the end of ${path.join(dir, `${file}.journal`)} cut off (a save the crash interrupted: it never returned)`);
            return w;
          },
          (w) => w.close(),
        );
      return new MemoryWindowStore<W>({ maxWindows: config.NEATROOTS_MAX_WINDOWS, maxResting: config.NEATROOTS_MAX_ENDED_WINDOWS, spillFile: path.join(dir, `${file}.spill`) }) as WindowStore<W>;
    },
    db,
    // Inline: a job queued and not yet run when the process stops is re-derived at start
    // (the SOP sessions still queued are queued again, and the runs that ended without becoming sessions).
    jobs: () =>
      drivers.get<Jobs>(
        'jobs',
        async () => new InlineJobs({ onFailed: (f) => log.error(failedLine(f)), onRetry: (r) => log.warn(retryLine(r)), onStopped: (j) => log.info(stoppedLine(j)) }),
        (j) => j.close(),
      ),
    // In the database (the shared_cache table): the model's answers outlive the process, so the
    // batch a crash interrupted, read again at the next start, is answered from here.
    sharedCache: async (name: string) => {
      const cache = await drivers.get<DbSharedCache>(
        'cache',
        async () =>
          new DbSharedCache({
            db: await db(),
            onError: (err) => log.error('shared cache (database; lookups miss and answers are kept in memory only until it answers)', err),
          }),
        async () => undefined,
      );
      return cache.named(name);
    },
    ready: async () => {
      if (migrating) throw new Error(migrating);
      return true;
    },
    failing,
    drain: async () => {
      if (bus) await drainEmbeddedBus(bus, config, opts.drainTopic, log, failing());
    },
    close: async () => {
      // The bus first: no handler runs while the database closes.
      const b = bus;
      if (b) await warnWhileSlow(log, 'closing the bus', () => b.close());
      await drivers.close(log);
      unlockData();
    },
  };
}

export interface DistributedPlatformOptions {
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** Names the Kafka client and the Postgres connections (the target). */
  name: string;
  /** How often neatroots_consumer_lag is read from the broker (default 10000; tests ask sooner). */
  consumerLagIntervalMs?: number;
  /**
   * The oldest Postgres the database opens on, as server_version_num (default
   * MIN_POSTGRES_VERSION, 14; tests ask for a newer one than they have).
   */
  minPostgresVersion?: number;
}

/** The configuration variable each driver needs in the distributed deployment. */
export const DRIVER_VARIABLES = { bus: 'NEATROOTS_KAFKA_BROKERS', windows: 'NEATROOTS_REDIS_URL', jobs: 'NEATROOTS_REDIS_URL', db: 'NEATROOTS_PG_URL' } as const;

/**
 * How long each driver's readiness check may take: /readyz answers within a probe's timeout
 * (the chart's is 3 s) even while a driver hangs, saying which did not answer.
 */
export const READY_CHECK_MS = 1_500;

/** Kafka, Redis and Postgres, from the validated configuration. */
export function distributedPlatform(opts: DistributedPlatformOptions): Platform {
  const { config, log, metrics } = opts;
  const drivers = new Drivers();
  let bus: Bus | undefined;
  let kafka: KafkaBus | undefined;
  // Readiness: each driver this process opened, by the name /readyz gives when it does not
  // answer. Added as a driver opens, so a service is ready on what it uses only (ingest: Kafka).
  const checks = new Map<string, { driver: Driver; dependency: string; check: () => Promise<boolean> }[]>();
  const checkOn = (driver: Driver, name: string, dependency: string, check: () => Promise<boolean>) => {
    const list = checks.get(name) ?? [];
    list.push({ driver, dependency, check });
    checks.set(name, list);
  };
  /**
   * What opening the database does before it is handed out (migrating it, or waiting for another
   * replica's migration): /readyz says it meanwhile, whatever drivers it is asked about.
   */
  let migrating: string | undefined;
  const REDIS = `redis (${DRIVER_VARIABLES.windows})`;
  // The jobs' Redis is BullMQ's own connections: asked through one of ours to the same URL.
  let redisPing: FailFastRedis | undefined;
  const repeats = new RepeatedErrors();
  // One Redis connection for the shared cache's every name and the boards; an outage there is
  // reported, never thrown (nor counted by readiness: the service serves without it, its
  // lookups missing).
  const redisCache = (): Promise<RedisSharedCache> => {
    needVar(DRIVER_VARIABLES.windows, !!config.NEATROOTS_REDIS_URL);
    return drivers.get<RedisSharedCache>(
      'cache',
      async () => {
        const c = new RedisSharedCache({
          url: config.NEATROOTS_REDIS_URL!,
          prefix: config.NEATROOTS_TOPIC_PREFIX,
          onError: (err) => {
            metrics.dependencyErrors.inc({ dependency: 'redis' });
            log.error('redis (shared cache; lookups miss and answers are not shared until it is back)', err);
          },
        });
        await c.connect();
        return c;
      },
      (c) => c.close(),
    );
  };
  const makeBus = (): Bus => {
    needVar(DRIVER_VARIABLES.bus, config.NEATROOTS_KAFKA_BROKERS.length > 0);
    kafka = new KafkaBus({
      brokers: config.NEATROOTS_KAFKA_BROKERS,
      clientId: `neatroots-${opts.name}`,
      partitions: config.NEATROOTS_PARTITIONS,
      sessionTimeout: config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS,
      lingerMs: config.NEATROOTS_KAFKA_LINGER_MS,
      pack: config.NEATROOTS_BUS_PACK === 'on',
      compression: config.NEATROOTS_KAFKA_COMPRESSION,
      compressMinBytes: config.NEATROOTS_KAFKA_COMPRESS_MIN_BYTES,
      // Records as large as the largest span ingest accepts (a raised NEATROOTS_MAX_ITEM_CHARS
      // raises it; a lowered one keeps the default, which the other topics' records need).
      maxRecordBytes: Math.max(DEFAULT_MAX_RECORD_BYTES, recordBytesFor({ maxItemChars: config.NEATROOTS_MAX_ITEM_CHARS })),
      partitionsConsumedConcurrently: config.NEATROOTS_KAFKA_CONCURRENT_PARTITIONS,
      minBytes: config.NEATROOTS_KAFKA_FETCH_MIN_BYTES,
      maxWaitTimeInMs: config.NEATROOTS_KAFKA_FETCH_MAX_WAIT_MS,
      maxBytes: config.NEATROOTS_KAFKA_FETCH_MAX_BYTES,
      maxBytesPerPartition: config.NEATROOTS_KAFKA_PARTITION_FETCH_BYTES,
      maxHandlerBytes: config.NEATROOTS_KAFKA_BATCH_MAX_BYTES,
      commitIntervalMs: config.NEATROOTS_KAFKA_COMMIT_INTERVAL_MS,
      heartbeatInterval: Math.max(500, Math.floor(config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS / 10)),
      rebalanceTimeout: Math.max(10_000, config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS),
      log: log.child({ service: 'kafka' }),
      setAside: { attempts: config.NEATROOTS_BUS_ATTEMPTS },
      deadLetterPrefix: config.NEATROOTS_TOPIC_PREFIX,
      onError: (err, where) => {
        metrics.dependencyErrors.inc({ dependency: 'kafka' });
        const at = `kafka ${where.topic}${where.group ? `/${where.group}` : ''}${where.partition !== undefined ? ` [${where.partition}]` : ''}`;
        // A batch read again while a dependency is down fails alike each time (same offset).
        const more = repeats.quieted(at, err);
        if (more !== undefined) log.error(`${at}${more}`, err);
      },
      onConsumerRestart: (where) => metrics.consumerRestarts.inc(where),
      // From 0: the first restart of a group is then an increase an alert sees (a series that
      // first appears at 1 has none, and NeatrootsConsumerRestarting needed one more).
      onSubscribe: (where) => metrics.consumerRestarts.inc(where, 0),
      onBatch: (b) => metrics.consumed.inc({ topic: b.topic, group: b.group }, b.records),
      // Read from the broker on a timer, not from the batches: all of the topic's partitions,
      // and a group that makes no progress (its handler failing, or blocked) reads as behind.
      onLag: (l) => metrics.consumerLag.set({ topic: l.topic, group: l.group }, l.lag),
      lagIntervalMs: opts.consumerLagIntervalMs,
    });
    const k = kafka;
    checkOn('bus', `kafka (${DRIVER_VARIABLES.bus})`, 'kafka', () => k.healthy());
    // Consumer groups are named after the topic prefix, so two deployments (or test runs)
    // sharing one Kafka never join each other's groups.
    return scopedGroups(kafka, config.NEATROOTS_TOPIC_PREFIX);
  };
  return {
    kind: 'distributed',
    bus: () => (bus ??= makeBus()),
    windows: <W>(name: string, wopts?: WindowStoreOptions) => {
      needVar(DRIVER_VARIABLES.windows, !!config.NEATROOTS_REDIS_URL);
      return drivers.get<WindowStore<W>>(
        `windows:${name}`,
        async () => {
          const store = await openRedisWindowStore<W>({
            url: config.NEATROOTS_REDIS_URL!,
            prefix: `${config.NEATROOTS_TOPIC_PREFIX}${name}`,
            memberFields: wopts?.memberFields,
            listFields: wopts?.listFields,
            writeLists: config.NEATROOTS_REDIS_RING_LISTS === 'on',
            // off (before a rollback to a version that cannot read lists): the windows no batch
            // loads (runs left open) are folded back into their JSON too, at the start and every 5 min
            inlineListsEveryMs: 5 * 60_000,
            onListsInlined: (n) => log.info(`windows: folded the ring lists of ${n} run windows back into their JSON (NEATROOTS_REDIS_RING_LISTS=off)`),
            cacheWindows: config.NEATROOTS_REDIS_WINDOW_CACHE,
            onError: (err) => {
              metrics.dependencyErrors.inc({ dependency: 'redis' });
              log.error('redis', err);
            },
          });
          checkOn('windows', REDIS, 'redis', () => store.healthy());
          return store;
        },
        (w) => w.close(),
      );
    },
    db: () => {
      needVar(DRIVER_VARIABLES.db, !!config.NEATROOTS_PG_URL);
      return drivers.get<Db>(
        'db',
        async () => {
          const pg = await openPostgres({ url: config.NEATROOTS_PG_URL!, max: 10, applicationName: `neatroots-${opts.name}` });
          // A server too old for the store's statements stops the start here, before migrating it
          // or taking traffic (on 13 every span write would fail while the service looked well).
          try {
            const found = await checkPostgresVersion(pg, opts.minPostgresVersion ?? MIN_POSTGRES_VERSION);
            log.info(`PostgreSQL ${found.version}`);
          } catch (err) {
            await pg.close().catch(() => undefined);
            throw err;
          }
          // Idempotent, and serialised by an advisory lock: whichever replica starts first runs them.
          await migrated(pg, log, (what) => (migrating = what));
          checkOn('db', `postgres (${DRIVER_VARIABLES.db})`, 'postgres', async () => {
            try {
              await pg.query('SELECT 1');
              return true;
            } catch {
              return false;
            }
          });
          return pg;
        },
        (d) => d.close(),
      );
    },
    jobs: () => {
      needVar(DRIVER_VARIABLES.jobs, !!config.NEATROOTS_REDIS_URL);
      return drivers.get<Jobs>(
        'jobs',
        async () => {
          const jobs = new BullJobs({
            url: config.NEATROOTS_REDIS_URL!,
            // Beside the windows on the same Redis, named apart by the deployment's prefix.
            prefix: `${config.NEATROOTS_TOPIC_PREFIX}jobs`,
            onFailed: (f) => {
              metrics.dependencyErrors.inc({ dependency: 'jobs' });
              log.error(failedLine(f));
            },
            onRetry: (r) => log.warn(retryLine(r)),
          });
          if (!redisPing) {
            const ping = (redisPing = new FailFastRedis({ url: config.NEATROOTS_REDIS_URL!, commandTimeoutMs: READY_CHECK_MS, onOutage: () => undefined }));
            // Reconnects on its own after a failed first connection (reported by the check).
            ping.redis.connect().catch(() => undefined);
            checkOn('jobs', REDIS, 'redis', async () => {
              try {
                return (await ping.redis.ping()) === 'PONG';
              } catch {
                return false;
              }
            });
          }
          return jobs;
        },
        (j) => j.close(),
      );
    },
    sharedCache: async (name: string) => (await redisCache()).named(name),
    // Optional for a process whose services need no Redis (the api): absent without its URL.
    sharedBoard: config.NEATROOTS_REDIS_URL ? async (name: string) => (await redisCache()).board(name) : undefined,
    // Every driver opened answers, each within READY_CHECK_MS; else rejected naming those that
    // did not (/readyz: 503 with them). Liveness (/healthz) never asks them: an outage of Kafka,
    // Redis or Postgres takes the processes out of their Services, it does not restart them.
    ready: async (only?: readonly Driver[]) => {
      if (migrating) throw new Error(migrating);
      const down = (
        await Promise.all(
          [...checks].map(async ([name, all]) => {
            const list = only ? all.filter((c) => only.includes(c.driver)) : all;
            const answers = await Promise.all(list.map(async (c) => {
              const ok = await within(c.check(), READY_CHECK_MS);
              if (!ok) metrics.dependencyErrors.inc({ dependency: c.dependency });
              return ok;
            }));
            return answers.every(Boolean) ? undefined : name;
          }),
        )
      ).filter((n): n is string => n !== undefined);
      if (down.length) throw new Error(`${down.join(', ')} did not answer within ${READY_CHECK_MS / 1000} s`);
      return true;
    },
    // Kafka keeps what was accepted: the next consumer takes it from the committed offset. The
    // jobs' workers stop here, before the modules stop and the links to other services close: a
    // job ending in its grace time (a session check's next question) still reaches the question
    // service, and one cut short is handed back, not failed on a closed channel.
    drain: async () => {
      const jobs = drivers.opened<Jobs>('jobs');
      if (jobs) await (await jobs.catch(() => undefined))?.stopWorking?.();
    },
    close: async () => {
      await drivers.close(log);
      await kafka?.close();
      await redisPing?.close();
    },
  };
}

/** true once `check` answers true within `ms`; false if it answers false, fails or takes longer. */
async function within(check: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([check.catch(() => false), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The database is handed out migrated (the same migrations on PGlite and Postgres), said in the
 * process's log (`neatroots start`, each service): `applied migrations 0019-0029 in 3812 ms`, or
 * `database up to date`; one a newer version migrated at warn. Meanwhile `state` says what it
 * does (for /readyz; undefined once done): migrating, or, on Postgres, waiting for another
 * process's migration (the advisory lock), said in the log too.
 */
async function migrated(db: Db, log: Logger, state: (what: string | undefined) => void): Promise<void> {
  let t0 = Date.now();
  let waited: number | undefined;
  state('migrating the database');
  try {
    const { applied } = await migrate(db, {
      log,
      onWait: () => {
        state(`waiting for another replica's migration (the advisory lock ${MIGRATE_LOCK})`);
        log.info(`waiting for another process's migration (the advisory lock ${MIGRATE_LOCK})`);
      },
      onLocked: () => {
        waited = Date.now() - t0;
        t0 = Date.now();
        state('migrating the database');
      },
    });
    const after = waited === undefined ? '' : ` (after waiting ${waited} ms for another process's migration)`;
    log.info(applied.length ? `applied ${migrationsNamed(applied)} in ${Date.now() - t0} ms${after}` : `database up to date${after}`);
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  } finally {
    state(undefined);
  }
}

/** Migration files by their versions: `migration 0029`, `migrations 0019-0029`, or listed when not in a row. */
function migrationsNamed(files: readonly string[]): string {
  const versions = files.map((f) => f.slice(0, 4));
  if (versions.length === 1) return `migration ${versions[0]}`;
  const inRow = versions.every((v, i) => i === 0 || Number(v) === Number(versions[i - 1]) + 1);
  return `migrations ${inRow ? `${versions[0]}-${versions[versions.length - 1]}` : versions.join(', ')}`;
}

/** A driver the configuration does not name: the process stops at start-up, saying which. */
export class MissingDriverError extends Error {
  constructor(readonly variable: string) {
    super(`${variable} is required by a service in this process`);
    this.name = 'MissingDriverError';
  }
}

function needVar(variable: string, given: boolean): void {
  if (!given) throw new MissingDriverError(variable);
}

function scopedGroups(bus: Bus, prefix: string): Bus {
  return {
    publish: (topic, records) => bus.publish(topic, records),
    subscribe: (topic, opts, handler) => bus.subscribe(topic, { ...opts, group: `${prefix}.${opts.group}` }, handler),
    backlog: bus.backlog ? (topic) => bus.backlog!(topic) : undefined,
    close: () => bus.close(),
  };
}

/** The log line of a job whose tries are used up. */
function failedLine(f: FailedJob): string {
  return `job ${f.queue}/${f.id} failed after ${f.attempts} attempts: ${f.reason}`;
}

/** The log line of a job the stop cut short with tries left (embedded): not a failure. */
function stoppedLine(j: StoppedJob): string {
  return `job ${j.queue}/${j.id}: try ${j.attempt} of ${j.attempts} cut short by the stop, not tried again in this process: ${j.reason}`;
}

/** The log line of a job's failed try with tries left: which job, why, and when it runs again. */
function retryLine(r: RetriedJob): string {
  return `job ${r.queue}/${r.id}: try ${r.attempt} of ${r.attempts} failed, tried again in ${r.retry_in_ms} ms: ${r.reason}`;
}
