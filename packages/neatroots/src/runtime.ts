import {
  compileRuleSet,
  recordDisabledChecks,
  SafeMatching,
  loadChecks,
  readProjects,
  watchChecks,
  type DatabaseCheck,
  type DisabledCheck,
  type LoadResult,
  type ProjectEntry,
  type RuleSet,
} from '@neatroots/checks';
import { spanLimitsOf, type Config } from '@neatroots/platform';
import type { SpanLimits } from '@neatroots/spans';
import type { Queryable } from '@neatroots/ports';
import { ChecksRepo, ProjectsRepo } from '@neatroots/store';

/** The wiring both deployments share: checks from their four sources, and steering. */

export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, err?: unknown): void;
}

export const consoleLogger: Logger = {
  info: (m) => console.log(m),
  warn: (m) => console.warn(`warning: ${m}`),
  error: (m, err) => console.error(`error: ${m}`, err ?? ''),
};

/**
 * Shutdown steps, run in the reverse order they were added (what started last stops first:
 * the servers stop accepting before the consumers drain and the connections close). A step
 * that fails is logged and the others still run. Running it twice runs it once.
 */
export class Shutdown {
  private readonly steps: (() => Promise<void>)[] = [];
  private done: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  add(step: () => Promise<void>): void {
    this.steps.push(step);
  }

  /** A step that runs after every other one. */
  addLast(step: () => Promise<void>): void {
    this.steps.unshift(step);
  }

  run(): Promise<void> {
    this.done ??= (async () => {
      for (const step of [...this.steps].reverse()) {
        try {
          await step();
        } catch (err) {
          this.log.error('shutdown step failed', err);
        }
      }
    })();
    return this.done;
  }
}

export interface CheckSet {
  rules(): RuleSet;
  loaded(): LoadResult;
  /** Reads every source again (what the watcher does on a change). */
  reload(): Promise<void>;
  /** `match` checks switched off in this process for a slow pattern (until it restarts). */
  disabled(): DisabledCheck[];
  close(): void;
}

export function readProjectsSafe(home: string, log: Logger): ProjectEntry[] {
  try {
    return readProjects(home);
  } catch (err) {
    log.error('projects registry unreadable; registered project checks skipped', err);
    return [];
  }
}

/**
 * The checks in effect: the shipped library, the user's folder, registered projects and
 * the database, later winning on the same id; reloaded without a restart when a file
 * changes. A file that stops validating keeps its last good version (and says why).
 */
export async function startCheckSet(opts: {
  home: string;
  /** Registered projects (read again on every reload). */
  projects: () => ProjectEntry[];
  db?: Queryable;
  log: Logger;
  watch?: boolean;
}): Promise<CheckSet> {
  const { log } = opts;
  const checksRepo = opts.db ? new ChecksRepo(opts.db) : undefined;
  const database = async (): Promise<DatabaseCheck[]> => (checksRepo ? (await checksRepo.list()).map((c) => ({ id: c.id, yaml: c.yaml })) : []);
  // Patterns people write run long texts off the event loop, each under the 50 ms limit; a
  // check disabled for a slow one is listed in the home folder for `checks list` and the API.
  const matching = new SafeMatching({ warn: (m) => log.warn(m) });
  const unrecord = recordDisabledChecks(opts.home, matching.disabled, (err) => log.error('could not record the disabled checks', err));
  const compile = (l: LoadResult): RuleSet => compileRuleSet(l.checks, matching.matcher);

  let loaded = loadChecks({ home: opts.home, projects: opts.projects(), database: await database(), lenient: true });
  for (const e of loaded.errors) log.error(`checks: ${e.message} (skipped)`);
  for (const w of loaded.warnings) log.warn(`checks: ${w}`);
  let rules = compile(loaded);

  const reload = async () => {
    const next = loadChecks({ home: opts.home, projects: opts.projects(), database: await database(), lenient: true, previous: loaded });
    for (const e of next.errors) log.error(`checks: ${e.message} (kept the last good version)`);
    loaded = next;
    rules = compile(loaded);
    log.info(`checks reloaded: ${loaded.checks.length} in effect`);
  };
  let stop = () => undefined as void;
  if (opts.watch ?? true) {
    // The watcher says that something changed; the reload reads every source again.
    stop = watchChecks({ home: opts.home, projects: opts.projects(), initial: loaded, onError: () => undefined }, () => {
      reload().catch((err) => log.error('checks reload failed', err));
    });
  }
  return {
    rules: () => rules,
    loaded: () => loaded,
    reload,
    disabled: () => matching.disabled.list(),
    close: () => {
      stop();
      unrecord();
      void matching.close();
    },
  };
}

/**
 * Whether halts act in a project: registered with steering (`neatroots init --steering`),
 * listed in NEATROOTS_STEERING, or switched on in the database. Cached for a few seconds.
 */
export function steeringLookup(opts: { projects: () => ProjectEntry[]; env: string[]; db?: Queryable; ttlMs?: number }): (project: string) => Promise<boolean> {
  const repo = opts.db ? new ProjectsRepo(opts.db) : undefined;
  const cache = new Map<string, { on: boolean; at: number; refreshing?: boolean }>();
  const ttl = opts.ttlMs ?? 5_000;
  const load = async (project: string) => {
    const on =
      opts.env.includes(project) || opts.projects().some((p) => p.name === project && p.steering) || ((await repo?.steering(project)) ?? false);
    cache.set(project, { on, at: Date.now() });
    return on;
  };
  return async (project) => {
    const hit = cache.get(project);
    if (!hit) return load(project);
    // Stale while revalidating: the rule engine asks on its hot path, and the database may be
    // busy storing spans; the last answer stands until the fresh one arrives.
    if (Date.now() - hit.at >= ttl && !hit.refreshing) {
      hit.refreshing = true;
      load(project).catch(() => (hit.refreshing = false));
    }
    return hit.on;
  };
}

/**
 * An API-key lookup with a cache: known keys are trusted for a minute and unknown ones asked
 * again after a few seconds, so an export never waits behind the database (or the review
 * service) on its hot path once its key was seen.
 */
export function cachedKeyLookup(resolve: (key: string) => Promise<string | null>): (key: string) => Promise<string | undefined> {
  const cache = new Map<string, { project: string | null; at: number }>();
  return async (key) => {
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < (hit.project ? 60_000 : 5_000)) return hit.project ?? undefined;
    const project = await resolve(key);
    if (cache.size > 10_000) cache.clear();
    cache.set(key, { project, at: Date.now() });
    return project ?? undefined;
  };
}

/** API keys from NEATROOTS_API_KEYS into the database (stored hashed); idempotent. */
export async function seedApiKeys(db: Queryable, keys: { project: string; key: string }[], steering: string[]): Promise<void> {
  const projects = new ProjectsRepo(db);
  for (const { project, key } of keys) {
    if ((await projects.resolveApiKey(key)) !== project) await projects.addApiKey(project, key, 'NEATROOTS_API_KEYS');
  }
  for (const p of steering) await projects.setSteering(p, true);
}

/** Where ingest listens and how large an export it takes, from the configuration. */
export function ingestListen(config: Config): { host: string; otlpPort: number; grpcPort: number; maxReceiveMessageBytes: number; limits: SpanLimits } {
  return {
    host: config.NEATROOTS_HOST,
    otlpPort: config.NEATROOTS_OTLP_PORT,
    grpcPort: config.NEATROOTS_GRPC_PORT,
    maxReceiveMessageBytes: config.NEATROOTS_MAX_MESSAGE_BYTES,
    limits: spanLimitsOf(config),
  };
}
