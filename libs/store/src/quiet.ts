import { systemClock, type Clock, type Queryable } from '@neatroots/ports';
import { FindingsRepo } from './findings.repo';

export interface QuietChecksOptions {
  /** How long a project's quiet set is trusted (another process may dismiss meanwhile). */
  ttlMs?: number;
  /** Projects kept; the least recently loaded are dropped beyond this. */
  maxProjects?: number;
  clock?: Clock;
}

/** The question the rule engine asks before sending a note: is this check quiet in this project? */
export type IsQuiet = (project: string, checkId: string) => Promise<boolean>;

interface Entry {
  quiet: Promise<ReadonlySet<string>>;
  expires: number;
  settled: boolean;
  refreshing: boolean;
}

/**
 * Which checks are quiet where (dismissed 3 times in the project), with a small cache: one
 * query per project per `ttlMs`, shared by concurrent callers. Dismiss and reopen in this
 * process invalidate at once; other processes see the change within `ttlMs`.
 */
export class QuietChecks {
  private readonly cache = new Map<string, Entry>();
  private readonly ttlMs: number;
  private readonly maxProjects: number;
  private readonly clock: Clock;
  private readonly source: (project: string) => Promise<string[]>;

  /**
   * `source`: the database (the review service), or a function that asks it (the rule
   * engine and the question service ask the review service over gRPC).
   */
  constructor(source: Queryable | ((project: string) => Promise<string[]>), opts: QuietChecksOptions = {}) {
    if (typeof source === 'function') this.source = source;
    else {
      const repo = new FindingsRepo(source);
      this.source = (project) => repo.quietChecks(project);
    }
    this.ttlMs = opts.ttlMs ?? 5_000;
    this.maxProjects = opts.maxProjects ?? 1_000;
    this.clock = opts.clock ?? systemClock;
  }

  async isQuiet(project: string, checkId: string): Promise<boolean> {
    return (await this.quietIn(project)).has(checkId);
  }

  async quietIn(project: string): Promise<ReadonlySet<string>> {
    const now = this.clock.now();
    const hit = this.cache.get(project);
    if (hit && hit.expires > now) return hit.quiet;
    // Stale while revalidating: the rule engine asks this on its hot path, and the database
    // may be busy storing spans; it keeps the last answer until the fresh one arrives.
    if (hit && hit.settled) {
      if (!hit.refreshing) {
        hit.refreshing = true;
        this.load(project).catch(() => {
          hit.refreshing = false;
        });
      }
      return hit.quiet;
    }
    return this.load(project);
  }

  private load(project: string): Promise<ReadonlySet<string>> {
    const quiet = this.source(project).then((ids) => new Set(ids) as ReadonlySet<string>);
    const entry: Entry = { quiet, expires: this.clock.now() + this.ttlMs, settled: false, refreshing: false };
    const previous = this.cache.get(project);
    quiet.then(
      () => {
        entry.settled = true;
        this.cache.delete(project);
        this.cache.set(project, entry);
        if (this.cache.size > this.maxProjects) {
          const oldest = this.cache.keys().next().value;
          if (oldest !== undefined) this.cache.delete(oldest);
        }
      },
      () => {
        // a failed load is not cached (the previous answer, if any, stays)
        if (this.cache.get(project) === entry) this.cache.delete(project);
      },
    );
    // The first load of a project is shared by concurrent callers; a refresh is not visible
    // until it settled (callers keep the previous answer meanwhile).
    if (!previous?.settled) this.cache.set(project, entry);
    return quiet;
  }

  /** Forget a project's quiet set (all projects without an argument). */
  invalidate(project?: string): void {
    if (project === undefined) this.cache.clear();
    else this.cache.delete(project);
  }

  /** As a plain function, for the rule engine's wiring. */
  get lookup(): IsQuiet {
    return (project, checkId) => this.isQuiet(project, checkId);
  }
}
