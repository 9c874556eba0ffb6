import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseCheckFile } from './schema';
import { CheckError, CheckProblems, isRuleCheck, type Check, type CheckSource } from './types';

/**
 * Where checks come from, in the seed's order (later wins on the same id):
 *   1. the shipped library (packages/neatroots/library/),
 *   2. ~/.neatroots/checks/ (or $NEATROOTS_HOME/checks/),
 *   3. each project's .neatroots/checks/ registered with `neatroots init`,
 *   4. checks kept in the database (written by the planner or a coding agent).
 */

/** A project registered with `neatroots init` (`<home>/projects.json`). */
export interface ProjectEntry {
  name: string;
  /** The project's root folder (absolute); its checks are in `<path>/.neatroots/checks/`. */
  path: string;
  /** Whether halt rules may act in this project. */
  steering: boolean;
}

/** A check kept in the database until it is saved to a file. */
export interface DatabaseCheck {
  id: string;
  yaml: string;
  /** Who wrote it: planner, agent (a coding agent over MCP), app or cli (a person). */
  origin?: string;
}

/**
 * The database checks that may halt: those a person saved in the app or the CLI. The seed: a
 * coding agent "can't create one, turn a check into one, or change yours", nor can the planner.
 */
export const ORIGINS_THAT_MAY_HALT: readonly string[] = ['app', 'cli'];

export interface LoadChecksOptions {
  /** The shipped library folder; defaults to defaultLibraryDir(); false leaves it out (`--no-library`). */
  library?: string | false;
  /** neatroots home (`$NEATROOTS_HOME` or ~/.neatroots); false skips its checks and its projects. */
  home?: string | false;
  /** Registered projects; read from `<home>/projects.json` when not given. */
  projects?: ProjectEntry[];
  /** More folders of the user's own checks, after the projects (`neatroots replay --checks DIR`). */
  dirs?: string[];
  database?: DatabaseCheck[];
  /**
   * Lenient loading (the server): a file that fails keeps the checks it gave last time
   * (from `previous`) and its error goes to `errors` instead of being thrown.
   */
  lenient?: boolean;
  previous?: LoadResult;
  /**
   * The parses of the last load, reused for each file and database check whose text did not
   * change (a server's reload after one check is saved parses that one, not every check).
   */
  cache?: CheckParseCache;
}

type Parsed = { checks: Check[]; warnings: string[] } | { error: unknown };

/**
 * What loadChecks parsed, by text: a check file by its path and text, a database check by its
 * id, origin and YAML. A load takes what it finds here with the same text (the same Check
 * objects, so a rule set compiled from them can keep what it compiled: SafeMatching), parses
 * the rest, and keeps only what it read: a file or check gone is dropped at the next load.
 */
export class CheckParseCache {
  private files = new Map<string, { source: CheckSource; project?: string; text: string; parsed: Parsed }>();
  private database = new Map<string, { origin?: string; yaml: string; parsed: Parsed }[]>();
  private nextFiles = new Map<string, { source: CheckSource; project?: string; text: string; parsed: Parsed }>();
  private nextDatabase = new Map<string, { origin?: string; yaml: string; parsed: Parsed }[]>();
  /**
   * The narrowed versions of checks overridden in some projects (resolve: narrow), by the check
   * narrowed and the projects it gave way in. Narrowing the same Check object for the same
   * projects gives the same object again, so its compiled rule is kept too; a changed base (a
   * new Check object) or a changed scope is narrowed, and compiled, afresh.
   */
  private narrowed = new Map<Check, Map<string, Check>>();
  private nextNarrowed = new Map<Check, Map<string, Check>>();
  /** Check files and database checks parsed (not found here) since the cache was made. */
  parses = 0;

  /** @internal loadChecks: a load begins. */
  begin(): void {
    this.nextFiles = new Map();
    this.nextDatabase = new Map();
    this.nextNarrowed = new Map();
  }

  /** @internal loadChecks: the load is over; what it did not read is dropped. */
  end(): void {
    this.files = this.nextFiles;
    this.database = this.nextDatabase;
    this.narrowed = this.nextNarrowed;
  }

  /** @internal resolve: `check` narrowed to give way in `projects`, the same object as last load's for the same two. */
  narrow(check: Check, projects: string[], make: () => Check): Check {
    const key = JSON.stringify(projects);
    const got = this.nextNarrowed.get(check)?.get(key) ?? this.narrowed.get(check)?.get(key) ?? make();
    let mine = this.nextNarrowed.get(check);
    if (!mine) this.nextNarrowed.set(check, (mine = new Map()));
    mine.set(key, got);
    return got;
  }

  /** @internal */
  file(file: string, source: CheckSource, project: string | undefined, text: string, parse: () => { checks: Check[]; warnings: string[] }): Parsed {
    const had = this.files.get(file);
    const parsed = had && had.text === text && had.source === source && had.project === project ? had.parsed : this.run(parse);
    this.nextFiles.set(file, { source, project, text, parsed });
    return parsed;
  }

  /** @internal */
  databaseCheck(db: DatabaseCheck, parse: () => { checks: Check[]; warnings: string[] }): Parsed {
    const had = this.database.get(db.id)?.find((e) => e.origin === db.origin && e.yaml === db.yaml);
    const parsed = had ? had.parsed : this.run(parse);
    const next = this.nextDatabase.get(db.id);
    const entry = { origin: db.origin, yaml: db.yaml, parsed };
    if (next) next.push(entry);
    else this.nextDatabase.set(db.id, [entry]);
    return parsed;
  }

  private run(parse: () => { checks: Check[]; warnings: string[] }): Parsed {
    this.parses++;
    try {
      return parse();
    } catch (error) {
      return { error };
    }
  }
}

/** A parse as it came (its checks, its warnings added) or as it failed (thrown again). */
function outcome(p: Parsed, warnings: string[]): Check[] {
  if ('error' in p) throw p.error;
  warnings.push(...p.warnings);
  return p.checks;
}

export interface CheckEntry {
  id: string;
  source: CheckSource;
  /** Absent for database checks. */
  file?: string;
  /** Set when the check applies only in these projects. */
  projects?: string[];
  /** Set when a project's own version replaces this one there. */
  except_projects?: string[];
  /** What this check replaced (wholly or in some projects), earliest first. */
  overrides: { source: CheckSource; file?: string }[];
}

export interface LoadResult {
  /**
   * The checks in effect, in load order of each id's first definition. Usually one per id;
   * an id a project overrides has one version per disjoint set of projects (see resolve).
   */
  checks: Check[];
  entries: CheckEntry[];
  warnings: string[];
  /** Lenient mode only: the problems that were skipped. */
  errors: CheckError[];
  /** Every check read, in load order, before later ones replaced earlier ones. */
  loaded: Check[];
}

export const CHECK_FILE_EXTENSIONS = ['.yaml', '.yml'];
const PROJECTS_FILE = 'projects.json';
const DATABASE_FILE = 'database';

/** `$NEATROOTS_HOME`, or `~/.neatroots`. */
export function neatrootsHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.NEATROOTS_HOME ? path.resolve(env.NEATROOTS_HOME) : path.join(os.homedir(), '.neatroots');
}

export function userChecksDir(home: string): string {
  return path.join(home, 'checks');
}

export function projectChecksDir(projectPath: string): string {
  return path.join(projectPath, '.neatroots', 'checks');
}

/**
 * The shipped library folder. It is found by walking up from this file, so it works from
 * the TypeScript sources (libs/checks/src), the build (libs/checks/dist) and an installed
 * package (node_modules/@neatroots/checks/dist, beside node_modules/neatroots).
 */
export function defaultLibraryDir(from: string = __dirname): string {
  let dir = path.resolve(from);
  for (;;) {
    for (const candidate of [
      path.join(dir, 'packages', 'neatroots', 'library'),
      path.join(dir, 'node_modules', 'neatroots', 'library'),
    ]) {
      if (isDir(candidate)) return candidate;
    }
    if (isDir(path.join(dir, 'library')) && packageName(dir) === 'neatroots') return path.join(dir, 'library');
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(`cannot find the shipped check library (packages/neatroots/library) above ${from}`);
}

// ---- the project registry ---------------------------------------------------------------

export function readProjects(home: string): ProjectEntry[] {
  const file = path.join(home, PROJECTS_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: invalid JSON (${(e as Error).message})`);
  }
  if (!Array.isArray(raw)) throw new Error(`${file}: must be a JSON list of projects`);
  return raw.map((p, i) => {
    const o = (p ?? {}) as Record<string, unknown>;
    if (typeof o.name !== 'string' || o.name === '') throw new Error(`${file}: project ${i + 1}: name must be a non-empty string`);
    if (typeof o.path !== 'string' || o.path === '') throw new Error(`${file}: project ${o.name}: path must be a non-empty string`);
    if (o.steering !== undefined && typeof o.steering !== 'boolean') throw new Error(`${file}: project ${o.name}: steering must be true or false`);
    return { name: o.name, path: path.resolve(home, o.path), steering: o.steering === true };
  });
}

/**
 * Adds or updates a project (`neatroots init`). An entry with the same name or the same
 * folder is replaced, so running init again in a folder renames rather than duplicates;
 * its steering stays as it was unless `steering` is given.
 * Returns the registry as written.
 */
export function registerProject(home: string, project: Omit<ProjectEntry, 'steering'> & { steering?: boolean }): ProjectEntry[] {
  if (!project.name) throw new Error('registerProject: name must be a non-empty string');
  const dir = path.resolve(project.path);
  const current = readProjects(home);
  // Registering again keeps steering as it was (by name, else by folder) unless it is given.
  const before = current.find((p) => p.name === project.name) ?? current.find((p) => p.path === dir);
  const entry: ProjectEntry = { name: project.name, path: dir, steering: project.steering ?? before?.steering ?? false };
  const list = current.filter((p) => p.name !== entry.name && p.path !== entry.path);
  list.push(entry);
  list.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  fs.mkdirSync(home, { recursive: true });
  const file = path.join(home, PROJECTS_FILE);
  // Write then rename: a reader (the watcher, a running server) never sees half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(list, null, 2)}\n`);
  fs.renameSync(tmp, file);
  return list;
}

// ---- loading ----------------------------------------------------------------------------

/** The check files in a folder: *.yaml and *.yml at any depth, sorted by path. */
export function listCheckFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const ent of fs.readdirSync(d, { withFileTypes: true })) {
      if (ent.name.startsWith('.') || ent.name === 'node_modules') continue;
      const p = path.join(d, ent.name);
      if (ent.isDirectory()) walk(p);
      else if (CHECK_FILE_EXTENSIONS.includes(path.extname(ent.name).toLowerCase()) && (ent.isFile() || ent.isSymbolicLink())) out.push(p);
    }
  };
  walk(dir);
  // Code-unit order, not the locale's: the same files load in the same order everywhere.
  return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** One folder to load, with what it is. */
export interface CheckFolder {
  dir: string;
  source: CheckSource;
  /** A registered project's folder: its checks apply only to that project. */
  project?: string;
  /** A folder that must exist (the library, a `--checks` folder); the others are optional. */
  required: boolean;
}

/** The folders the options name, in load order. */
export function checkFolders(opts: LoadChecksOptions): CheckFolder[] {
  const out: CheckFolder[] = [];
  const library = opts.library === undefined ? defaultLibraryDir() : opts.library;
  if (library !== false) out.push({ dir: path.resolve(library), source: 'library', required: true });
  const home = opts.home === undefined ? neatrootsHome() : opts.home;
  if (home !== false) out.push({ dir: userChecksDir(home), source: 'user', required: false });
  const projects = opts.projects ?? (home !== false ? readProjects(home) : []);
  for (const p of projects) out.push({ dir: projectChecksDir(p.path), source: 'project', project: p.name, required: false });
  for (const d of opts.dirs ?? []) out.push({ dir: path.resolve(d), source: 'user', required: true });
  return out;
}

/**
 * Loads every check, later sources winning on the same id. Strict by default: the first
 * invalid file throws CheckError (the CLI exits 2). With `lenient`, problems are collected
 * in `errors` and a failing file keeps what it gave in `previous`.
 */
export function loadChecks(opts: LoadChecksOptions = {}): LoadResult {
  const warnings: string[] = [];
  const errors: CheckError[] = [];
  const loaded: Check[] = [];

  const fail = (e: unknown, file: string, fallback: () => Check[]) => {
    const err = e instanceof CheckError ? e : new CheckError(file, undefined, undefined, (e as Error).message ?? String(e));
    if (!opts.lenient) throw err;
    errors.push(err);
    loaded.push(...fallback());
  };

  const cache = opts.cache;
  cache?.begin();
  const fromFolder = (dir: string) => (opts.previous?.loaded ?? []).filter((c) => c.file?.startsWith(dir + path.sep));

  let folders: CheckFolder[];
  try {
    folders = checkFolders(opts);
  } catch (e) {
    // An unreadable projects.json: the other sources still load in lenient mode.
    const home = opts.home === undefined ? neatrootsHome() : opts.home;
    fail(e, home ? path.join(home, PROJECTS_FILE) : PROJECTS_FILE, () => []);
    folders = checkFolders({ ...opts, projects: [] });
  }

  for (const folder of folders) {
    if (!isDir(folder.dir)) {
      if (folder.required) fail(new CheckError(folder.dir, undefined, undefined, 'no such folder'), folder.dir, () => fromFolder(folder.dir));
      continue;
    }
    let files: string[];
    try {
      files = listCheckFiles(folder.dir);
    } catch (e) {
      fail(e, folder.dir, () => fromFolder(folder.dir));
      continue;
    }
    for (const file of files) {
      try {
        const parse = (text: string) => {
          const parsed = parseCheckFile(text, file, folder.source);
          return { checks: folder.project ? scopeToProject(parsed.checks, folder.project, file) : parsed.checks, warnings: parsed.warnings };
        };
        const text = fs.readFileSync(file, 'utf8');
        loaded.push(...outcome(cache ? cache.file(file, folder.source, folder.project, text, () => parse(text)) : parse(text), warnings));
      } catch (e) {
        fail(e, file, () => (opts.previous?.loaded ?? []).filter((c) => c.file === file));
      }
    }
  }

  for (const db of opts.database ?? []) {
    try {
      const parse = () => {
        const w: string[] = [];
        return { checks: [parseDatabaseCheck(db, w)], warnings: w };
      };
      loaded.push(...outcome(cache ? cache.databaseCheck(db, parse) : parse(), warnings));
    } catch (e) {
      fail(e, DATABASE_FILE, () => (opts.previous?.loaded ?? []).filter((c) => c.source === 'database' && c.id === db.id));
    }
  }

  const resolved = resolve(loaded, warnings, cache);
  cache?.end();
  return { ...resolved, warnings, errors, loaded };
}

/** A database check: its YAML holds one check whose id, when given, must be the stored id. */
export function parseDatabaseCheck(db: DatabaseCheck, warnings: string[] = []): Check {
  let parsed: ReturnType<typeof parseCheckFile>;
  try {
    parsed = parseCheckFile(db.yaml, DATABASE_FILE, 'database', { mayHalt: db.origin !== undefined && ORIGINS_THAT_MAY_HALT.includes(db.origin) });
  } catch (e) {
    // Name the stored check even when its YAML is too broken to say which it is.
    if (e instanceof CheckError && !e.checkId) throw new CheckError(DATABASE_FILE, db.id, e.field, e.reason);
    throw e;
  }
  if (parsed.checks.length !== 1) {
    throw new CheckError(DATABASE_FILE, db.id, undefined, `must hold exactly one check, found ${parsed.checks.length}`);
  }
  const check = parsed.checks[0];
  if (check.id !== db.id) throw new CheckError(DATABASE_FILE, db.id, 'id', `is ${JSON.stringify(check.id)} in the YAML but ${JSON.stringify(db.id)} in the database`);
  warnings.push(...parsed.warnings.filter((w) => !w.endsWith('holds no checks')));
  return check;
}

interface Version {
  check: Check;
  overrides: { source: CheckSource; file?: string }[];
}

/**
 * Later wins on the same id. A later check limited to some projects (a registered project's
 * own version of a library check, say) wins only in those projects: the earlier one stays in
 * effect everywhere else, with `applies_to.not_project` (or a shorter `project` list) saying
 * where it gave way. So one id can have several versions, applying to disjoint sets of
 * projects; a run belongs to one project and meets at most one of them.
 */
function resolve(loaded: Check[], warnings: string[], cache?: CheckParseCache): { checks: Check[]; entries: CheckEntry[] } {
  const byId = new Map<string, Version[]>();
  for (const c of loaded) {
    const scope = projectsOf(c);
    // Seed: a coding agent "can't create one [a halt rule], turn a check into one, or change
    // yours", so a database check never replaces one of your halt rules, in the projects where
    // that rule applies (another project's database check with the same id is no threat to it).
    const guarded = c.source === 'database' ? (byId.get(c.id) ?? []).find((v) => isRuleCheck(v.check) && v.check.action === 'halt' && overlaps(scope, v.check)) : undefined;
    if (guarded) {
      warnings.push(`${DATABASE_FILE}: check ${c.id}: ignored: it would replace your halt rule in ${guarded.check.file ?? DATABASE_FILE}`);
      continue;
    }
    const kept: Version[] = [];
    const overrides: { source: CheckSource; file?: string }[] = [];
    for (const v of byId.get(c.id) ?? []) {
      const vScope = projectsOf(v.check);
      if (!overlaps(scope, v.check)) {
        kept.push(v);
        continue;
      }
      overrides.push(...v.overrides, { source: v.check.source, ...(v.check.file ? { file: v.check.file } : {}) });
      const whole = !scope || (vScope !== undefined && vScope.every((p) => scope.includes(p)));
      if (whole) {
        if (v.check.source === c.source && c.source !== 'database') {
          warnings.push(`${c.file ?? DATABASE_FILE}: check ${c.id}: replaces the check with the same id in ${v.check.file ?? DATABASE_FILE}`);
        }
        continue;
      }
      const check = v.check;
      const projects = scope as string[];
      kept.push({ ...v, check: cache ? cache.narrow(check, projects, () => narrow(check, projects)) : narrow(check, projects) });
    }
    // An earlier check can reach here through two versions (the user's, narrowed, and a project's, which overrode it).
    const seen = new Set<string>();
    const unique = overrides.filter((o) => {
      const k = `${o.source}\u0000${o.file ?? ''}`;
      return !seen.has(k) && seen.add(k);
    });
    kept.push({ check: c, overrides: unique });
    byId.set(c.id, kept);
  }
  const all = [...byId.values()].flat();
  return {
    checks: all.map((v) => v.check),
    entries: all.map((v) => ({
      id: v.check.id,
      source: v.check.source,
      ...(v.check.file ? { file: v.check.file } : {}),
      ...(v.check.applies_to?.project?.length ? { projects: v.check.applies_to.project } : {}),
      ...(v.check.applies_to?.not_project?.length ? { except_projects: v.check.applies_to.not_project } : {}),
      overrides: v.overrides,
    })),
  };
}

/** The projects a check is limited to (applies_to.project); undefined: every project. */
function projectsOf(c: Check): string[] | undefined {
  return c.applies_to?.project?.length ? c.applies_to.project : undefined;
}

/** Whether a check limited to `scope` (undefined: every project) applies in some project where `v` does. */
function overlaps(scope: string[] | undefined, v: Check): boolean {
  if (!scope) return true;
  const vScope = projectsOf(v);
  const vExcept = v.applies_to?.not_project ?? [];
  return vScope ? vScope.some((p) => scope.includes(p)) : scope.some((p) => !vExcept.includes(p));
}

/** The check, no longer in effect in `projects`. */
function narrow(c: Check, projects: string[]): Check {
  const at = c.applies_to ?? {};
  if (at.project?.length) return { ...c, applies_to: { ...at, project: at.project.filter((p) => !projects.includes(p)) } };
  return { ...c, applies_to: { ...at, not_project: [...new Set([...(at.not_project ?? []), ...projects])] } };
}

/**
 * A registered project's checks apply to that project only: applies_to.project left out
 * becomes the project; naming any other project is a problem of the file (CheckError naming
 * file, check and field), as a database check saved in one project may not name another.
 */
function scopeToProject(checks: Check[], project: string, file: string): Check[] {
  const problems = checks
    .filter((c) => c.applies_to?.project?.some((p) => p !== project))
    .map(
      (c) =>
        new CheckError(
          file,
          c.id,
          'applies_to.project',
          `a check in project ${project}'s folder applies there only; leave applies_to.project out or name ${project}`,
        ),
    );
  if (problems.length === 1) throw problems[0];
  if (problems.length) throw new CheckProblems(problems);
  return checks.map((c) => (c.applies_to?.project?.length ? c : { ...c, applies_to: { ...c.applies_to, project: [project] } }));
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function packageName(dir: string): string | undefined {
  try {
    return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string }).name;
  } catch {
    return undefined;
  }
}
