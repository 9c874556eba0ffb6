/**
 * `match` checks switched off in this process because a pattern was too slow on a span. The
 * seed: such a pattern "is skipped with a warning in the log until neatroots restarts", so
 * this lives as long as the process, and reloading the checks (new matchers for the same
 * check and pattern) does not turn one back on; a changed pattern is a new one and runs, and
 * the entry of the old one goes once the checks are reloaded without it (`retain`), as does
 * that of a check deleted.
 */
export interface DisabledCheck {
  check_id: string;
  pattern: string;
  /** Where the check came from: user, project or database (library patterns are trusted). */
  source?: string;
  /** The check's applies_to: the projects it runs in (all when absent), and those it does not. */
  projects?: string[];
  not_projects?: string[];
  /** Why, in words: what `checks list`, the API and the log say. */
  reason: string;
  /** How long the slow call ran (at least, when it had to be stopped). */
  ms: number;
  limit_ms: number;
  /** ISO time it was switched off. */
  since: string;
}

export class DisabledChecks {
  private readonly byKey = new Map<string, DisabledCheck>();
  private readonly listeners = new Set<(all: DisabledCheck[]) => void>();
  /** Grows on every change: matchers compare it instead of looking themselves up per call. */
  version = 0;

  /** A check is one per id and projects (two projects' own checks may share an id): each is disabled apart. */
  static key(checkId: string, pattern: string, scope: CheckScope = {}): string {
    return `${checkId}\u0000${scopeKey(scope)}\u0000${pattern}`;
  }

  has(checkId: string, pattern: string, scope?: CheckScope): boolean {
    return this.byKey.has(DisabledChecks.key(checkId, pattern, scope));
  }

  get(checkId: string, pattern: string, scope?: CheckScope): DisabledCheck | undefined {
    return this.byKey.get(DisabledChecks.key(checkId, pattern, scope));
  }

  /** Records it (once: the first reason stands) and tells the listeners. */
  add(d: DisabledCheck): boolean {
    const k = DisabledChecks.key(d.check_id, d.pattern, d);
    if (this.byKey.has(k)) return false;
    this.byKey.set(k, d);
    this.changed();
    return true;
  }

  /**
   * Keeps the entries whose key (DisabledChecks.key) is in `inEffect`, the checks and patterns
   * the checks now in effect run, and drops the others: a check whose pattern changed or that
   * was deleted is no longer disabled. Tells the listeners when one went; returns how many.
   */
  retain(inEffect: ReadonlySet<string>): number {
    let dropped = 0;
    for (const k of [...this.byKey.keys()]) {
      if (inEffect.has(k)) continue;
      this.byKey.delete(k);
      dropped++;
    }
    if (dropped) this.changed();
    return dropped;
  }

  private changed(): void {
    this.version++;
    const all = this.list();
    for (const l of this.listeners) l(all);
  }

  list(): DisabledCheck[] {
    return [...this.byKey.values()];
  }

  /** Called with the whole list on every change; returns a function that stops it. */
  onChange(listener: (all: DisabledCheck[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** The projects a check runs in (its applies_to), as a DisabledCheck keeps them. */
export interface CheckScope {
  projects?: readonly string[];
  not_projects?: readonly string[];
}

function scopeKey(s: CheckScope): string {
  const list = (l?: readonly string[]) => (l?.length ? [...l].sort().join(',') : '');
  return `${list(s.projects)}\u0001${list(s.not_projects)}`;
}

/** What a project's API answers of a disabled check: never the projects it names (other projects'). */
export function disabledView(d: DisabledCheck): Omit<DisabledCheck, 'projects' | 'not_projects'> {
  return { check_id: d.check_id, pattern: d.pattern, ...(d.source !== undefined ? { source: d.source } : {}), reason: d.reason, ms: d.ms, limit_ms: d.limit_ms, since: d.since };
}

/** Whether the check runs in `project` (what a project's API may show). */
export function disabledIn(d: DisabledCheck, project: string): boolean {
  return (!d.projects?.length || d.projects.includes(project)) && !d.not_projects?.includes(project);
}

/** The process's list (what "until neatroots restarts" means). */
export const disabledChecks = new DisabledChecks();
