import { constants as osConstants } from 'node:os';
import {
  CheckParseCache,
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
import { createLogger, spanLimitsOf, type Config } from '@neatroots/platform';
import type { Logger } from '@neatroots/ports';
import type { QuestionSet } from '@neatroots/questions';
import type { SpanLimits } from '@neatroots/spans';
import { questionsOf } from './questions';

/** The wiring both deployments share: checks from their four sources, steering, logging. */

/** The process's logger: the configured level and format, on the CLI's standard error. */
export function cliLogger(config: Config, io: { err(line: string): void }): Logger {
  return createLogger({ level: config.NEATROOTS_LOG_LEVEL, format: config.NEATROOTS_LOG_FORMAT, write: (line) => io.err(line) });
}

let crashLog: Logger | undefined;

/**
 * A crash (an exception or a rejection nothing handled) said in the process's own log format,
 * with the error, before node ends the process as it would anyway (a JSON log otherwise gets
 * node's plain-text lines only). One hook per process; the last server's logger says it.
 */
export function logCrashes(log: Logger): void {
  if (!crashLog) {
    process.on('uncaughtExceptionMonitor', (err, origin) =>
      crashLog?.error(`crashed: ${origin === 'unhandledRejection' ? 'a promise rejected and nothing handled it' : 'an exception nothing caught'} (a bug: please report it with this line); the process ends`, err),
    );
  }
  crashLog = log;
}

/**
 * Resolves on the first SIGINT, SIGTERM or SIGHUP (a closed terminal, or what a supervisor or
 * `relaunch` passes on). A second one of any of them during the stop (SIGTERM then Ctrl-C, say)
 * stops the process at once: `log` says so, and the process ends by that signal, as node's
 * default would (exit 143 for SIGTERM, 130 for SIGINT, 129 for SIGHUP), without finishing the stop.
 */
export function untilSignal(log?: Pick<Logger, 'warn'>): Promise<void> & { dispose(): void } {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  let resolve!: () => void;
  const signalled = new Promise<void>((r) => (resolve = r));
  let first: NodeJS.Signals | undefined;
  const dispose = () => signals.forEach((s) => process.off(s, on));
  function on(signal: NodeJS.Signals): void {
    if (!first) {
      first = signal;
      resolve();
      return;
    }
    // Each signal used to be listened for once: a second of the same kind ended the process
    // (node's default), one of another kind was ignored.
    log?.warn(`${signal} after ${first}: stopping now, without finishing the stop (a second signal ends the process at once)`);
    dispose();
    process.kill(process.pid, signal);
    // Still here: something else listens for it too; end as the signal would have.
    process.exit(128 + (osConstants.signals[signal] ?? 0));
  }
  for (const s of signals) process.on(s, on);
  // dispose(): the listeners are removed (a start that returned, in a process that goes on).
  return Object.assign(signalled, { dispose });
}

export interface CheckSet {
  rules(): RuleSet;
  loaded(): LoadResult;
  /** The question checks of the set (recomputed only when the checks are reloaded). */
  questions(): QuestionSet;
  /** Reads every source again (what the watcher does on a change). */
  reload(): Promise<void>;
  /**
   * Reads the database checks again and reloads only if they changed (after a plan is stored:
   * most write nothing new, and a reload parses every check file on the event loop that
   * answers pre-call checks and raises findings, 20-240 ms here).
   */
  refresh(): Promise<void>;
  /** `match` checks switched off in this process for a slow pattern (until it restarts). */
  disabled(): DisabledCheck[];
  /**
   * What the loads so far did: check files and database checks parsed, rules compiled. A reload
   * parses and compiles only what changed since the last one (one saved check: one of each).
   */
  work(): { parses: number; compiled_rules: number };
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
  /** The database checks (the review service's). */
  database?: () => Promise<DatabaseCheck[]>;
  log: Logger;
  watch?: boolean;
  /**
   * How often the database checks are read again (default 5 s): a check saved through the
   * api of another process (the distributed deployment) takes effect here within this.
   */
  databasePollMs?: number;
}): Promise<CheckSet> {
  const { log } = opts;
  // The review service may still be starting (another process): its checks come at the next reload.
  let databaseRead = true;
  // The database checks the set was last loaded with: a poll that reads others reloads.
  let databaseSeen = '';
  const database = async (): Promise<DatabaseCheck[]> => {
    try {
      const out = opts.database ? await opts.database() : [];
      databaseRead = true;
      databaseSeen = JSON.stringify(out);
      return out;
    } catch (err) {
      if (databaseRead) log.error('database checks unreadable (review service); retrying', err);
      databaseRead = false;
      return [];
    }
  };
  // Patterns people write run long texts off the event loop, each under the 50 ms limit; a
  // check disabled for a slow one is listed in the home folder for `checks list` and the API.
  const matching = new SafeMatching({ warn: (m) => log.warn(m) });
  const unrecord = recordDisabledChecks(opts.home, matching.disabled, (err) => log.error('could not record the disabled checks', err));
  // A check disabled for a pattern no longer in effect (changed, or the check deleted) turns back on.
  const compile = (l: LoadResult): RuleSet => matching.compile(l.checks);
  // A reload parses the files and database checks whose text changed, and compiles their rules,
  // not every check: saving one check costs one check, however many the project has.
  const cache = new CheckParseCache();

  let loaded = loadChecks({ home: opts.home, projects: opts.projects(), database: await database(), lenient: true, cache });
  for (const e of loaded.errors) log.error(`checks: ${e.message} (skipped)`);
  for (const w of loaded.warnings) log.warn(`checks: ${w}`);
  let rules = compile(loaded);

  const reload = async () => {
    const next = loadChecks({ home: opts.home, projects: opts.projects(), database: await database(), lenient: true, previous: loaded, cache });
    for (const e of next.errors) log.error(`checks: ${e.message} (kept the last good version)`);
    loaded = next;
    rules = compile(loaded);
    log.info(`checks reloaded: ${loaded.checks.length} in effect`);
  };
  const poll = async () => {
    if (!databaseRead) return reload();
    if (!opts.database) return;
    // Files are watched; database checks are written by other processes (the api, the
    // planner), so they are read again, and a change reloads the set.
    const before = databaseSeen;
    await database();
    if (databaseRead && databaseSeen !== before) await reload();
  };
  const retry = setInterval(() => {
    poll().catch((err) => log.error('checks reload failed', err));
  }, opts.databasePollMs ?? 5_000);
  retry.unref();
  let stop = () => undefined as void;
  if (opts.watch ?? true) {
    // The watcher says that something changed and loads nothing itself (load: false); the
    // reload reads every source again and parses only the files whose text changed. It gets
    // the projects as a function, so it watches projects.json and the folders of projects
    // registered (or removed) while the server runs, the demo project included.
    stop = watchChecks({ home: opts.home, projects: opts.projects, load: false, onError: () => undefined }, () => {
      reload().catch((err) => log.error('checks reload failed', err));
    });
  }
  return {
    rules: () => rules,
    loaded: () => loaded,
    questions: questionsOf(() => loaded),
    reload,
    refresh: poll,
    disabled: () => matching.disabled.list(),
    work: () => ({ parses: cache.parses, compiled_rules: matching.compiledRules }),
    close: () => {
      clearInterval(retry);
      stop();
      unrecord();
      void matching.close();
    },
  };
}

/**
 * Whether halts act in a project: registered with steering in this process's registry
 * (`neatroots init --steering`), or switched on in the database (NEATROOTS_STEERING as the
 * review service seeds it at its start, the demo). The process's own NEATROOTS_STEERING is not
 * read: every service answers as the database says, so a project taken out of the setting stops
 * halting everywhere once review has started with it. Cached for a few seconds.
 */
export function steeringLookup(opts: {
  projects: () => ProjectEntry[];
  /** Steering switched on in the database (the review service's). */
  database?: (project: string) => Promise<boolean>;
  ttlMs?: number;
  /** How long a look older than ttlMs waits for the fresh answer before the last one stands (default 250 ms). */
  waitMs?: number;
}): (project: string) => Promise<boolean> {
  const cache = new Map<string, { on: boolean; at: number; refreshing?: Promise<boolean> }>();
  const ttl = opts.ttlMs ?? 5_000;
  const waitMs = opts.waitMs ?? 250;
  const load = async (project: string) => {
    const on = opts.projects().some((p) => p.name === project && p.steering) || ((await opts.database?.(project)) ?? false);
    cache.set(project, { on, at: Date.now() });
    return on;
  };
  return async (project) => {
    const hit = cache.get(project);
    if (!hit) return load(project);
    if (Date.now() - hit.at < ttl) return hit.on;
    // Older than ttl: asked again, and the fresh answer waited for, so a switch made since the
    // last look (however long ago that was) holds from the next run on. Not for long: the rule
    // engine asks on its hot path and the database may be busy storing spans; past waitMs (or
    // if the asking fails) the last answer stands, and the fresh one serves the next look.
    hit.refreshing ??= load(project).catch(() => {
      hit.refreshing = undefined;
      return hit.on;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(hit.on), waitMs)));
    try {
      return await Promise.race([hit.refreshing, late]);
    } finally {
      clearTimeout(timer);
    }
  };
}

/** Where ingest listens and how large an export it takes, from the configuration. */
export function ingestListen(config: Config): {
  host: string;
  otlpPort: number;
  grpcPort: number;
  otlpHttpPort: number;
  otlpHttpCorsOrigins: string[];
  maxReceiveMessageBytes: number;
  limits: SpanLimits;
} {
  return {
    host: config.NEATROOTS_HOST,
    otlpPort: config.NEATROOTS_OTLP_PORT,
    grpcPort: config.NEATROOTS_GRPC_PORT,
    otlpHttpPort: config.NEATROOTS_OTLP_HTTP_PORT,
    otlpHttpCorsOrigins: config.NEATROOTS_OTLP_HTTP_CORS_ORIGINS,
    maxReceiveMessageBytes: config.NEATROOTS_MAX_MESSAGE_BYTES,
    limits: spanLimitsOf(config),
  };
}
