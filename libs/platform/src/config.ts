import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { nextCronTime } from './jobs/common';
import { LOG_FORMATS, LOG_LEVELS } from './runtime/log';

/**
 * Configuration from the environment, validated once at start-up (STYLE.md 1): a wrong
 * value stops the process with a message naming the variable, instead of failing later.
 */
/**
 * A numeric setting: a blank value (`VAR=` in a .env file, `value: ""` in a Kubernetes env, a
 * compose `${VAR}` of an unset variable) is unset, so the setting's default; z.coerce.number
 * alone reads '' and ' ' as 0, which for some settings means something else (0 retention days
 * keeps every span for good). Anything else is read as z.coerce.number reads it. A value it
 * refuses is said with what the setting takes and the value given, not in zod's words
 * ('Expected number, received nan'): `expected a whole number from 0 to 65535, got "abc"`.
 */
export function numeric<T extends z.ZodTypeAny>(setting: T) {
  const expects = expectedOf(setting);
  return z.unknown().transform((v, ctx): z.output<T> => {
    const r = setting.safeParse(typeof v === 'string' && v.trim() === '' ? undefined : v);
    if (r.success) return r.data as z.output<T>;
    const own = r.error.issues.find((i) => i.code === z.ZodIssueCode.custom);
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `${own ? own.message : `expected ${expects}`}, got ${givenOf(v)}` });
    return z.NEVER;
  });
}

/** What a numeric setting takes, in words: "a whole number from 1 to 64", "a number of at least 0". */
function expectedOf(setting: z.ZodTypeAny): string {
  let t: z.ZodTypeAny = setting;
  for (;;) {
    if (t instanceof z.ZodDefault) t = t._def.innerType;
    else if (t instanceof z.ZodOptional || t instanceof z.ZodNullable) t = t.unwrap();
    else if (t instanceof z.ZodEffects) t = t.innerType();
    else break;
  }
  if (!(t instanceof z.ZodNumber)) return 'a number';
  const what = t.isInt ? 'a whole number' : 'a number';
  const min = t.minValue;
  const max = t.maxValue;
  if (min !== null && max !== null) return `${what} from ${min} to ${max}`;
  if (min !== null) return `${what} of at least ${min}`;
  if (max !== null) return `${what} of at most ${max}`;
  return what;
}

/** The value given, quoted (cut at 60 characters: it goes into a message, not a dump). */
function givenOf(v: unknown): string {
  const s = typeof v === 'string' ? v : String(v);
  return JSON.stringify(s.length > 60 ? `${s.slice(0, 60)}...` : s);
}

const port = (def: number) => numeric(z.coerce.number().int().min(0).max(65535).default(def));

const list = z
  .string()
  .default('')
  .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean));

/** A UTC cron pattern of five fields, refused at start-up with what is wrong with it. */
function cronSetting(fallback: string) {
  return z
    .string()
    .default(fallback)
    .superRefine((s, ctx) => {
      try {
        nextCronTime(s, Date.now());
      } catch (err) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message });
      }
    });
}

const schema = z.object({
  NEATROOTS_HOME: z.string().min(1).default(join(homedir(), '.neatroots')),
  NEATROOTS_DATA_DIR: z.string().min(1).optional(),
  NEATROOTS_HOST: z.string().min(1).default('127.0.0.1'),
  NEATROOTS_OTLP_PORT: port(4317),
  NEATROOTS_GRPC_PORT: port(50051),
  /** OTLP/HTTP (POST /v1/traces, protobuf and JSON): 4318, the OTLP standard. */
  NEATROOTS_OTLP_HTTP_PORT: port(4318),
  /** Origins browser agents may export from over OTLP/HTTP (CORS), comma separated; `*` for any. Default none. */
  NEATROOTS_OTLP_HTTP_CORS_ORIGINS: list,
  /** Origins whose pages may call the REST API from a browser (CORS), comma separated; `*` for any. Default none. */
  NEATROOTS_API_CORS_ORIGINS: list,
  NEATROOTS_HTTP_PORT: port(8080),
  /**
   * The GitHub REST APIs a workspace's connection may name (its api_url), comma separated, besides
   * https://api.github.com. Default: any https URL not on a loopback, private or link-local address.
   */
  NEATROOTS_GITHUB_API_URLS: list,
  /**
   * project=key pairs, comma separated; keys are stored hashed. A key may end in its scope,
   * `:ingest` (send spans, notes and halts, pre-call checks: for agents) or `:api` (everything,
   * the default): the text after a key's last ':' is its scope. `none`: no keys, said on purpose
   * (`none: true`): review revokes every key the setting made, which an empty setting does not.
   */
  NEATROOTS_API_KEYS: z
    .string()
    .default('')
    .transform((s, ctx): { project: string; key: string; scope?: 'api' | 'ingest' }[] & { none?: true } => {
      if (s.trim() === 'none') return Object.assign([], { none: true as const });
      const out: { project: string; key: string; scope?: 'api' | 'ingest' }[] = [];
      const parts = s.split(',').map((x) => x.trim()).filter(Boolean);
      // A key never goes into a message (they reach logs): an entry is named by its place.
      for (const [n, part] of parts.entries()) {
        const i = part.indexOf('=');
        const colon = part.lastIndexOf(':');
        const end = colon > i ? colon : part.length;
        if (i <= 0 || end === i + 1) {
          ctx.addIssue({ code: z.ZodIssueCode.custom, message: `entry ${n + 1} of ${parts.length} is not project=key (or project=key:ingest)` });
          return z.NEVER;
        }
        const project = part.slice(0, i);
        const key = part.slice(i + 1, end);
        const scope = colon > i ? part.slice(colon + 1) : undefined;
        // The text after the colon may be part of a key: it is not said either.
        if (scope !== undefined && scope !== 'api' && scope !== 'ingest') {
          ctx.addIssue({
            code: z.ZodIssueCode.custom,
            message: `entry ${n + 1} of ${parts.length} (${project}) has an unknown scope: the text after a key's last ':' is its scope, ingest or api (a key with ':' in it ends in :api)`,
          });
          return z.NEVER;
        }
        const before = out.findIndex((o) => o.key === key);
        if (before >= 0) {
          ctx.addIssue({ code: z.ZodIssueCode.custom, message: `entries ${before + 1} (${out[before].project}) and ${n + 1} (${project}) have the same key: a key opens one project` });
          return z.NEVER;
        }
        out.push(scope ? { project, key, scope } : { project, key });
      }
      return out;
    }),
  /**
   * Distributed: a secret the services' own gRPC ports (review, question, the rule engine) ask of
   * every call, and their clients send; unset, those ports take calls from anyone who reaches them.
   */
  NEATROOTS_INTERNAL_TOKEN: z.string().min(16, 'must be at least 16 characters (a random secret, the same for every service)').optional(),
  /**
   * With NEATROOTS_INTERNAL_TOKEN set: `false` takes calls that carry no token (each method so
   * called logged at warn, at most once a minute), while the services still send theirs: the
   * first rollout of an upgrade from a build before the token, whose services send none. A call
   * carrying another token is refused either way. `true` (the default) refuses calls without it.
   */
  NEATROOTS_INTERNAL_TOKEN_REQUIRED: z
    .preprocess((v) => (typeof v === 'string' ? (v.trim() === '' ? undefined : v.trim().toLowerCase()) : v), z.enum(['true', 'false']).default('true'))
    .transform((v) => v === 'true'),
  /**
   * Projects where halts act. `none`: no project, said on purpose (`none: true`): review switches
   * steering off in every project the setting switched it on in, which an empty setting does not.
   */
  NEATROOTS_STEERING: z
    .string()
    .default('')
    .transform((s): string[] & { none?: true } =>
      (s.trim() === 'none' ? Object.assign([], { none: true as const }) : s.split(',').map((x) => x.trim()).filter(Boolean))),
  /** Projects whose pre-call checks fail closed: a call whose check does not answer in time is not run. */
  NEATROOTS_PRECHECK_FAIL_CLOSED: list,
  /** How long an SDK waits for a pre-call check's answer. */
  NEATROOTS_PRECHECK_TIMEOUT_MS: numeric(z.coerce.number().int().min(1).max(60_000).default(50)),
  NEATROOTS_MAX_MESSAGE_BYTES: numeric(z.coerce.number().int().min(1024).default(8 * 1024 * 1024)),
  NEATROOTS_KAFKA_BROKERS: list,
  NEATROOTS_REDIS_URL: z.string().url().optional(),
  NEATROOTS_PG_URL: z.string().url().optional(),
  NEATROOTS_TOPIC_PREFIX: z.string().regex(/^[a-zA-Z0-9._-]+$/).default('neatroots'),
  /** Partitions of the topics the Kafka bus creates (at least the rule engine's replicas). */
  NEATROOTS_PARTITIONS: numeric(z.coerce.number().int().min(1).max(1000).default(6)),
  /**
   * How long a publish waits for others to share its Kafka request. Under load, records gather
   * anyway while the previous request is in flight; a long linger only adds latency.
   */
  NEATROOTS_KAFKA_LINGER_MS: numeric(z.coerce.number().int().min(0).max(1000).default(1)),
  /** A consumer's fetch waits for this many bytes, or NEATROOTS_KAFKA_FETCH_MAX_WAIT_MS (Kafka's fetch.min.bytes, fetch.max.wait.ms). */
  NEATROOTS_KAFKA_FETCH_MIN_BYTES: numeric(z.coerce.number().int().min(1).default(1)),
  NEATROOTS_KAFKA_FETCH_MAX_WAIT_MS: numeric(z.coerce.number().int().min(1).max(5000).default(500)),
  /**
   * The most bytes one fetch of a consumer brings (as stored, compressed), all its partitions
   * together, and of one partition (Kafka's fetch.max.bytes, max.partition.fetch.bytes). A
   * consumer holds a fetch decompressed: with gzip 10 to 20 times this.
   */
  NEATROOTS_KAFKA_FETCH_MAX_BYTES: numeric(z.coerce.number().int().min(1024).max(256 * 1024 * 1024).default(2 * 1024 * 1024)),
  NEATROOTS_KAFKA_PARTITION_FETCH_BYTES: numeric(z.coerce.number().int().min(1024).max(256 * 1024 * 1024).default(512 * 1024)),
  /**
   * A partition's fetched records go to the service's step in parts of at most this many bytes
   * of record values (decoded): what a consumer holds decoded at once is this times
   * NEATROOTS_KAFKA_CONCURRENT_PARTITIONS, whatever the backlog.
   */
  NEATROOTS_KAFKA_BATCH_MAX_BYTES: numeric(z.coerce.number().int().min(1024).max(256 * 1024 * 1024).default(2 * 1024 * 1024)),
  /**
   * Partitions whose batches a consumer handles at once (their runs differ, so their steps
   * overlap; the rule engine and the question service take those that come together as one step).
   */
  NEATROOTS_KAFKA_CONCURRENT_PARTITIONS: numeric(z.coerce.number().int().min(1).max(64).default(8)),
  /**
   * A consumer commits the offsets it has handled at most this often (at the end of a batch, and
   * always when it closes); 0 commits after every batch. A crash re-reads what was handled since.
   */
  NEATROOTS_KAFKA_COMMIT_INTERVAL_MS: numeric(z.coerce.number().int().min(0).max(60_000).default(500)),
  /** How long Kafka waits for a consumer's heartbeat before giving its partitions to another. */
  NEATROOTS_KAFKA_SESSION_TIMEOUT_MS: numeric(z.coerce.number().int().min(1000).default(30_000)),
  /** Each process's /healthz, /readyz and /metrics. */
  NEATROOTS_ADMIN_PORT: port(9464),
  /** The review and question services' gRPC ports (grpc.health.v1 is served there too). */
  NEATROOTS_REVIEW_PORT: port(50053),
  NEATROOTS_QUESTION_PORT: port(50052),
  /** grpc.health.v1 of the processes that have no gRPC service of their own to host it. */
  NEATROOTS_SERVICE_PORT: port(50054),
  /** Where the other services reach review and question. */
  NEATROOTS_REVIEW_ADDR: z.string().min(1).default('127.0.0.1:50053'),
  NEATROOTS_QUESTION_ADDR: z.string().min(1).default('127.0.0.1:50052'),
  /**
   * Where ingest reaches the rule engine for pre-call checks (its service port,
   * NEATROOTS_SERVICE_PORT; a Service in front of every replica: any of them answers).
   */
  NEATROOTS_RULE_ENGINE_ADDR: z.string().min(1).default('127.0.0.1:50054'),
  /** How long a run's window is kept after its run_end, for late spans. */
  NEATROOTS_WINDOW_TTL_MS: numeric(z.coerce.number().int().min(1000).default(10 * 60_000)),
  /**
   * The embedded bus: `log`, an append-only log in the data folder (an export is acknowledged
   * once its spans are on disk; after a crash the rest is processed at the next start), or
   * `memory` (nothing survives the process; tests and comparisons).
   */
  NEATROOTS_BUS: z.enum(['log', 'memory']).default('log'),
  /**
   * The records of one run in one export travel as one record of the Kafka topic or the durable
   * log (a pack; consumers still see one record per span). `off` writes one record per span, as
   * before packs (comparisons); either way both are read.
   */
  NEATROOTS_BUS_PACK: z.enum(['on', 'off']).default('on'),
  /**
   * Distributed: the question scheduler's ring of a run's latest spans kept as a Redis list beside
   * its window, pushed and trimmed (on), or written whole in its JSON (off: what a rule engine of
   * a version before 2026-12-04 reads; during a rolling upgrade from one, and before a rollback to
   * one: the lists found are folded back into the JSON, see windows/redis.ts). Read either way.
   */
  NEATROOTS_REDIS_RING_LISTS: z.enum(['on', 'off']).default('on'),
  /** Compression of what the Kafka bus sends (gzip at a fast level): a tenth of the bytes for the broker and the consumers (docs/performance.md). */
  NEATROOTS_KAFKA_COMPRESSION: z.enum(['none', 'gzip']).default('gzip'),
  /** A Kafka send smaller than this (bytes before compression) goes uncompressed: a light load's publishes are not held up by it. 0: every send compressed. */
  NEATROOTS_KAFKA_COMPRESS_MIN_BYTES: numeric(z.coerce.number().int().min(0).default(65_536)),
  /** Compression of the embedded durable log's frames of 1 KB or more (deflate at its fastest level). */
  NEATROOTS_LOG_COMPRESSION: z.enum(['none', 'deflate']).default('none'),
  /** Records accepted but not yet processed past which ingest answers RESOURCE_EXHAUSTED. */
  NEATROOTS_MAX_BACKLOG: numeric(z.coerce.number().int().min(100).default(100_000)),
  /**
   * Embedded: question task records waiting for the question service past which the rule engine
   * hands it no new questions (they are not asked) until it catches up; 0: no bound.
   */
  NEATROOTS_MAX_QUESTION_BACKLOG: numeric(z.coerce.number().int().min(0).default(100_000)),
  /**
   * Checks coding agents (MCP create_check) may have saved in one project; a new one past it is
   * refused (too_many_checks), people's saves are not bounded. 0: no bound.
   */
  NEATROOTS_MAX_AGENT_CHECKS: numeric(z.coerce.number().int().min(0).max(1_000_000).default(100)),
  /**
   * Resident memory (MB) of the process past 90% of which ingest refuses exports; 0: none. Unset:
   * 1024, or the container's memory limit when that is lower (ingest's memoryCeilingMb).
   */
  NEATROOTS_MEMORY_CEILING_MB: numeric(z.coerce.number().int().min(0).optional()),
  /** How long a stop waits for what was accepted to be processed; the rest stays in the log for the next start. */
  NEATROOTS_DRAIN_MS: numeric(z.coerce.number().int().min(0).default(10_000)),
  /**
   * How long a stop keeps serving, not ready (/readyz 503, gRPC health NOT_SERVING), before its
   * ports close: the time a load balancer or Kubernetes takes to stop sending it new connections.
   * 0 (the default): they close at once. The Helm chart sets 5000.
   */
  NEATROOTS_SHUTDOWN_DELAY_MS: numeric(z.coerce.number().int().min(0).max(600_000).default(0)),
  /**
   * Once a part of the embedded default stopped for good (a disk error under the bus log or a
   * window journal): `stay` up, health checks failing, reads still served; or stop and `exit` 1,
   * for a restart policy (Docker's, systemd's) to start it again.
   */
  NEATROOTS_ON_FAILING: z.enum(['stay', 'exit']).default('stay'),
  /**
   * A live trace question is asked again at most this often per run while the run goes on (the
   * spans that come meanwhile go with the next ask; the run's end always asks). 0: after every
   * batch that brought the run new spans.
   */
  NEATROOTS_LIVE_TRACE_GAP_MS: numeric(z.coerce.number().int().min(0).max(600_000).default(1_000)),
  /**
   * The question service's consumers of the question tasks in one process. Unset: 1 distributed
   * (a fetch's partitions come together and are answered as one step), 4 embedded.
   */
  NEATROOTS_QUESTION_CONSUMERS: numeric(z.coerce.number().int().min(1).max(64).optional()),
  /**
   * The embedded journal writes the rule engine's windows saved since its last checkpoint this
   * often (0: every save on its own); the bus position moves at the checkpoints.
   */
  NEATROOTS_WINDOW_CHECKPOINT_MS: numeric(z.coerce.number().int().min(0).max(10_000).default(200)),
  /**
   * Redis run windows: how many windows each store keeps after saving them, to hand out again
   * by revision instead of reading and parsing them (0: none).
   */
  NEATROOTS_REDIS_WINDOW_CACHE: numeric(z.coerce.number().int().min(0).max(1_000_000).default(4096)),
  /** How long the window of a run that went quiet without a run_end is kept. */
  NEATROOTS_WINDOW_IDLE_MS: numeric(z.coerce.number().int().min(1000).default(6 * 3_600_000)),
  /**
   * The embedded deployment's run windows: `journal` (every save synced to a journal in the data
   * folder before the bus position moves: after a crash, runs in progress go on where they were)
   * or `memory` (lost with the process; comparisons).
   */
  NEATROOTS_WINDOWS: z.enum(['journal', 'memory']).default('journal'),
  /** Run windows the embedded deployment keeps in memory; past it the least recently used are spilled to the data folder. */
  NEATROOTS_MAX_WINDOWS: numeric(z.coerce.number().int().min(100).default(50_000)),
  /**
   * Windows of ended runs (kept NEATROOTS_WINDOW_TTL_MS for late spans) the embedded deployment
   * keeps in memory, per store; past it the longest ended wait in the spill file.
   */
  NEATROOTS_MAX_ENDED_WINDOWS: numeric(z.coerce.number().int().min(0).default(1_000)),
  /**
   * The embedded database (PGlite in the data folder) takes a checkpoint once this many MB of
   * WAL were written since the last one, which bounds its pg_wal folder and what a start after
   * a crash replays. 0: only PGlite's own, at 1 GB.
   */
  NEATROOTS_DB_CHECKPOINT_MB: numeric(z.coerce.number().int().min(0).max(1024).default(64)),
  /**
   * What ingest accepts (docs/operations.md, "Limits"): JSON nesting, attribute count and
   * size, item size, tokens of one span, and how far ahead of this clock a timestamp may be.
   * An item past them is rejected at ingest, naming the field.
   */
  NEATROOTS_MAX_JSON_DEPTH: numeric(z.coerce.number().int().min(2).max(1000).default(64)),
  NEATROOTS_MAX_ATTRIBUTES: numeric(z.coerce.number().int().min(1).default(1_000)),
  NEATROOTS_MAX_ATTRIBUTE_CHARS: numeric(z.coerce.number().int().min(64).default(1024 * 1024)),
  NEATROOTS_MAX_ITEM_CHARS: numeric(z.coerce.number().int().min(1024).default(4 * 1024 * 1024)),
  /** At most 2^53: a run of millions of such spans still sums far below the store's bigint. */
  NEATROOTS_MAX_TOKENS: numeric(z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(1_000_000_000)),
  NEATROOTS_MAX_FUTURE_MS: numeric(z.coerce.number().int().min(0).max(10 * 365 * 24 * 3_600_000).default(24 * 3_600_000)),
  /** Tries of a bus message (or batch) that throws, before it is set aside as a dead letter. */
  NEATROOTS_BUS_ATTEMPTS: numeric(z.coerce.number().int().min(1).max(100).default(3)),
  /**
   * The key secrets are encrypted with at rest (a workspace's GitHub token): 32 bytes as 64 hex
   * digits or base64. Unset: the embedded default makes one, kept 0600 in the data folder
   * (secretKeyOf); the distributed services need it set, the same on every replica.
   */
  NEATROOTS_SECRET_KEY: z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined || s.trim() === '') return undefined;
      const key = parseSecretKey(s.trim());
      if (!key) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'expected 32 bytes as 64 hex digits or base64 (e.g. openssl rand -hex 32)' });
        return z.NEVER;
      }
      return key;
    }),
  /** When open pull requests of suggestions are looked at on GitHub (UTC cron, five fields). */
  SOPOPS_PR_STATUS_CRON: cronSetting('*/15 * * * *'),
  /**
   * Days a run's spans are kept after it started and was last seen: older spans are deleted by
   * an hourly job (the runs, their counters and findings stay). 0 keeps every span.
   */
  NEATROOTS_SPAN_RETENTION_DAYS: numeric(z.coerce.number().min(0).max(36_500).default(30)),
  /**
   * Days a SOP session's transcript (its turns and tool calls) is kept after it was received:
   * the same hourly job then empties it (its checks, findings and quoted evidence stay). 0, the
   * default, keeps every transcript.
   */
  NEATROOTS_TRANSCRIPT_RETENTION_DAYS: numeric(z.coerce.number().min(0).max(36_500).default(0)),
  /** When the retention job runs (UTC cron, five fields). */
  NEATROOTS_RETENTION_CRON: cronSetting('23 * * * *'),
  /** When every workspace's failure modes and themes are made again (sopops_recluster_daily; UTC cron, five fields). */
  SOPOPS_RECLUSTER_CRON: cronSetting('0 6 * * *'),
  /** The least severe log lines written. */
  NEATROOTS_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** json (one object a line, for log collectors) or pretty (readable); default: pretty on a terminal. */
  NEATROOTS_LOG_FORMAT: z.enum(LOG_FORMATS).optional(),
});

export type Config = z.infer<typeof schema> & { dataDir: string };

/** 32 bytes from 64 hex digits or base64, or null. */
export function parseSecretKey(s: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex');
  if (/^[A-Za-z0-9+/]{43}=?$/.test(s)) {
    const b = Buffer.from(s, 'base64');
    return b.length === 32 ? b : null;
  }
  return null;
}

/** The NEATROOTS_MAX_* limits in the shape of @neatroots/spans's SpanLimits (ingest's `limits`). */
export function spanLimitsOf(c: Config): {
  maxJsonDepth: number;
  maxAttributes: number;
  maxAttributeChars: number;
  maxItemChars: number;
  maxTokens: number;
  maxFutureMs: number;
} {
  return {
    maxJsonDepth: c.NEATROOTS_MAX_JSON_DEPTH,
    maxAttributes: c.NEATROOTS_MAX_ATTRIBUTES,
    maxAttributeChars: c.NEATROOTS_MAX_ATTRIBUTE_CHARS,
    maxItemChars: c.NEATROOTS_MAX_ITEM_CHARS,
    maxTokens: c.NEATROOTS_MAX_TOKENS,
    maxFutureMs: c.NEATROOTS_MAX_FUTURE_MS,
  };
}

export class ConfigError extends Error {
  constructor(readonly issues: string[]) {
    super(`invalid configuration:\n${issues.map((i) => `  ${i}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`));
  }
  const c = parsed.data;
  return { ...c, dataDir: c.NEATROOTS_DATA_DIR ?? join(c.NEATROOTS_HOME, 'data') };
}
