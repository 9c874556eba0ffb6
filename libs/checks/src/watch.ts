import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  checkFolders,
  loadChecks,
  neatrootsHome,
  projectChecksDir,
  readProjects,
  userChecksDir,
  type LoadChecksOptions,
  type LoadResult,
  type ProjectEntry,
} from './sources';
import { CheckError } from './types';

export interface WatchChecksOptions extends Omit<LoadChecksOptions, 'projects'> {
  /**
   * Registered projects. A list is fixed: projects.json is not watched. A function is called
   * again whenever something changes (and `<home>/projects.json` is watched for that), so a
   * project registered or removed while the watcher runs is loaded and its folder watched,
   * or dropped. Absent: read from `<home>/projects.json`, which is watched.
   */
  projects?: ProjectEntry[] | (() => ProjectEntry[]);
  /** Wait this long after the last change before reloading (editors write in bursts); default 100 ms. */
  debounceMs?: number;
  /** The checks already loaded (usually the strict load at start-up); loaded leniently if absent. */
  initial?: LoadResult;
  /**
   * false: the watcher loads nothing, it only says that something changed (onChange is called
   * with no result) and the caller reloads with what it has (its own CheckParseCache, its
   * database checks), so an edited file is not parsed twice. Default true.
   */
  load?: boolean;
  /** Problems found by a reload; the failing files keep their last good checks. Default: console.error. */
  onError?: (errors: CheckError[]) => void;
}

export const DEFAULT_WATCH_DEBOUNCE_MS = 100;

/**
 * Reloads the checks whenever a file changes in any of their folders, or a project is
 * registered (`<home>/projects.json`). The reload is lenient: a broken file keeps the checks
 * it gave last time and is reported through onError, so one bad save never takes the
 * server's checks away. Returns a function that stops watching.
 *
 * A folder that does not exist yet (no ~/.neatroots/checks/ before the first check is
 * written) is noticed when it is created: its nearest existing parent is watched for it.
 */
export function watchChecks(opts: WatchChecksOptions & { load: false }, onChange: () => void): () => void;
export function watchChecks(opts: WatchChecksOptions, onChange: (result: LoadResult) => void): () => void;
export function watchChecks(opts: WatchChecksOptions, onChange: (result: LoadResult) => void): () => void {
  const debounceMs = opts.debounceMs ?? DEFAULT_WATCH_DEBOUNCE_MS;
  const report = opts.onError ?? ((errors: CheckError[]) => errors.forEach((e) => console.error(e.message)));
  const home = opts.home === undefined ? neatrootsHome() : opts.home;
  const given = opts.projects;
  /** The projects now: undefined when they are read from projects.json (by loadChecks itself). */
  const projectsNow = (): ProjectEntry[] | undefined => (typeof given === 'function' ? given() : given);
  /** Whether `<home>/projects.json` is watched: unless a fixed list was given. */
  const watchRegistry = !Array.isArray(given) && home !== false;
  const loads = opts.load !== false;
  const load = (projects: ProjectEntry[] | undefined, previous?: LoadResult): LoadResult =>
    loadChecks({ ...opts, projects, lenient: true, ...(previous ? { previous } : {}) });
  let startProjects: ProjectEntry[] | undefined;
  try {
    startProjects = projectsNow();
  } catch {
    startProjects = undefined; // a failing function: sync() reads it again below
  }
  let current = opts.initial ?? (loads ? load(startProjects ?? (typeof given === 'function' ? [] : undefined)) : undefined);
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const watchers = new Map<string, fs.FSWatcher>();

  const schedule = () => {
    if (closed) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(reload, debounceMs);
  };

  const reload = () => {
    timer = undefined;
    if (closed) return;
    let next: LoadResult;
    let projects: ProjectEntry[] | undefined;
    if (!loads) {
      // The caller loads: the watches follow the projects now, and it is told.
      try {
        projects = projectsNow();
      } catch {
        projects = undefined; // read again by sync
      }
      sync(projects);
      (onChange as () => void)();
      return;
    }
    try {
      // Read once per reload: the same projects are loaded and watched.
      projects = projectsNow();
      next = load(projects, current);
    } catch (e) {
      // Lenient loading only throws for something outside the check files (no library at all),
      // or the projects function did.
      report([e instanceof CheckError ? e : new CheckError('checks', undefined, undefined, (e as Error).message ?? String(e))]);
      sync(projects);
      return;
    }
    current = next;
    sync(projects);
    if (next.errors.length) report(next.errors);
    onChange(next);
  };

  /** The watches the folders need now: `key` -> how to start it. */
  const wanted = (known?: ProjectEntry[]): Map<string, () => fs.FSWatcher> => {
    const out = new Map<string, () => fs.FSWatcher>();
    let projects: ProjectEntry[] | undefined = known;
    if (!projects) {
      try {
        projects = typeof given === 'function' ? given() : given ?? (home !== false ? readProjects(home) : undefined);
      } catch {
        projects = []; // reported by the reload that reads it
      }
    }
    let dirs: string[] = [];
    try {
      dirs = checkFolders({ ...opts, projects: projects ?? [] }).map((f) => f.dir);
    } catch {
      // No library folder to be found: reported by the reload; still watch the rest.
      if (home !== false) dirs = [userChecksDir(home), ...(projects ?? []).map((p) => projectChecksDir(p.path)), ...(opts.dirs ?? [])];
    }
    for (const dir of dirs) {
      if (isDir(dir)) out.set(`r:${dir}`, () => fs.watch(dir, { recursive: true }, schedule));
      else {
        const { parent, child } = nearestExisting(dir);
        if (parent) out.set(`c:${parent}:${child}`, () => fs.watch(parent, (_e, name) => name === child && schedule()));
      }
    }
    if (watchRegistry && isDir(home)) {
      out.set(`p:${home}`, () => fs.watch(home, (_e, name) => (name === 'projects.json' || name === 'checks') && schedule()));
    }
    return out;
  };

  /** Starts and stops watches to match the folders now; `projects`: already read by the caller. */
  const sync = (projects?: ProjectEntry[]) => {
    if (closed) return;
    const want = wanted(projects);
    for (const [key, w] of watchers) {
      if (!want.has(key)) {
        w.close();
        watchers.delete(key);
      }
    }
    for (const [key, start] of want) {
      if (watchers.has(key)) continue;
      try {
        const w = start();
        // A watched folder that goes away ends its watch: look again for what to watch.
        w.on('error', () => {
          w.close();
          watchers.delete(key);
          schedule();
        });
        watchers.set(key, w);
      } catch {
        // Removed between the check and the watch; the next change in its parent brings it back.
      }
    }
  };

  sync(startProjects);
  return () => {
    closed = true;
    if (timer) clearTimeout(timer);
    for (const w of watchers.values()) w.close();
    watchers.clear();
  };
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The nearest existing ancestor of `dir`, and the name of its child on the way to `dir`. */
function nearestExisting(dir: string): { parent?: string; child?: string } {
  let child = path.resolve(dir);
  for (;;) {
    const parent = path.dirname(child);
    if (parent === child) return {};
    if (isDir(parent)) return { parent, child: path.basename(child) };
    child = parent;
  }
}
