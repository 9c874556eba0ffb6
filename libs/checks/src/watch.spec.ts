import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadChecks, readProjects, registerProject, type LoadResult, type ProjectEntry } from './sources';
import type { CheckError } from './types';
import { watchChecks } from './watch';

let tmp: string;
let home: string;
let stop: (() => void) | undefined;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-watch-'));
  home = path.join(tmp, 'home');
  fs.mkdirSync(home);
});
afterEach(() => {
  stop?.();
  stop = undefined;
  fs.rmSync(tmp, { recursive: true, force: true });
});

const countRule = (id: string, n: number) => `id: ${id}\nkind: rule\nrule: { type: count, at_least: ${n} }\n`;

function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

/** Starts a watcher and returns a way to wait for the reload that satisfies `until`. */
function watch(opts: { debounceMs?: number; projects?: () => ProjectEntry[] } = {}) {
  const results: LoadResult[] = [];
  const errors: CheckError[][] = [];
  const waiters: { until: (r: LoadResult) => boolean; resolve: (r: LoadResult) => void }[] = [];
  const initial = loadChecks({ library: false, home, lenient: true, ...(opts.projects ? { projects: opts.projects() } : {}) });
  const given = opts.projects ? { projects: opts.projects } : {};
  stop = watchChecks({ library: false, home, ...given, initial, debounceMs: opts.debounceMs ?? 50, onError: (e) => errors.push(e) }, (r) => {
    results.push(r);
    for (const w of [...waiters]) {
      if (w.until(r)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(r);
      }
    }
  });
  const next = (until: (r: LoadResult) => boolean, ms = 30_000) =>
    new Promise<LoadResult>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no reload in time')), ms);
      waiters.push({ until, resolve: (r) => (clearTimeout(t), resolve(r)) });
    });
  return { results, errors, next, initial };
}

const ids = (r: LoadResult) => r.checks.map((c) => c.id).sort();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Writes `text` to `file` again until `reloaded` settles: node 20's recursive watch on Linux
 * watches the subfolders of a folder it was just given asynchronously, so a write made at once
 * may come before it watches there (on a loaded machine, well after 20 ms).
 */
async function writeUntil(file: string, text: string, reloaded: Promise<unknown>): Promise<void> {
  let settled = false;
  const done = reloaded.then(
    () => (settled = true),
    () => (settled = true),
  );
  while (!settled) {
    fs.writeFileSync(file, text);
    await Promise.race([done, sleep(250)]);
  }
  await reloaded;
}

describe('watchChecks', () => {
  it('reloads when a check file is added or changed, including in a folder created later', async () => {
    const w = watch();
    expect(ids(w.initial)).toEqual([]);
    // ~/.neatroots/checks/ does not exist yet: its parent is watched for it.
    const file = path.join(home, 'checks', 'nested', 'a.yaml');
    const added = w.next((r) => ids(r).includes('a'));
    write(file, countRule('a', 1));
    expect(ids(await added)).toEqual(['a']);
    const changed = w.next((r) => r.checks.some((c) => c.id === 'a' && c.kind === 'rule' && c.rule.type === 'count' && c.rule.at_least === 7));
    await writeUntil(file, countRule('a', 7), changed);
  });

  it('keeps the last good checks of a broken file and reports the error', async () => {
    const file = path.join(home, 'checks', 'a.yaml');
    write(file, countRule('a', 1));
    const w = watch();
    const broken = w.next((r) => r.errors.length > 0);
    fs.writeFileSync(file, countRule('a', 0));
    const r = await broken;
    expect(ids(r)).toEqual(['a']);
    expect(r.checks[0]).toMatchObject({ rule: { at_least: 1 } });
    expect(w.errors.flat().map((e) => e.message)).toContain(`${file}: check a: rule.at_least: must be an integer >= 1, got 0`);
    const fixed = w.next((r2) => r2.errors.length === 0);
    fs.writeFileSync(file, countRule('a', 2));
    expect((await fixed).checks[0]).toMatchObject({ rule: { at_least: 2 } });
  });

  it('picks up a project registered while it runs', async () => {
    write(path.join(home, 'checks', 'a.yaml'), countRule('a', 1));
    const proj = path.join(tmp, 'proj');
    write(path.join(proj, '.neatroots', 'checks', 'p.yaml'), countRule('p', 1));
    const w = watch();
    const registered = w.next((r) => ids(r).includes('p'));
    registerProject(home, { name: 'proj', path: proj, steering: false });
    const r = await registered;
    expect(r.checks.find((c) => c.id === 'p')?.applies_to).toEqual({ project: ['proj'] });
    // And its folder is now watched too.
    const more = w.next((r2) => ids(r2).includes('q'));
    write(path.join(proj, '.neatroots', 'checks', 'q.yaml'), countRule('q', 1));
    await more;
  });

  it('with a projects function (the server: registry plus demo), loads a project registered while it runs and watches its folder', async () => {
    // As startCheckSet gives it: the registry read again each time, plus a project of its own.
    const demo = path.join(tmp, 'demo');
    write(path.join(demo, '.neatroots', 'checks', 'd.yaml'), countRule('d', 1));
    const first = path.join(tmp, 'first');
    write(path.join(first, '.neatroots', 'checks', 'f.yaml'), countRule('f', 1));
    registerProject(home, { name: 'first', path: first, steering: false });
    const projects = (): ProjectEntry[] => [...readProjects(home), { name: 'demo', path: demo, steering: false }];
    const w = watch({ projects });
    expect(ids(w.initial)).toEqual(['d', 'f']);

    // `neatroots init` of a second project, its folder already holding a check.
    const second = path.join(tmp, 'second');
    const file = path.join(second, '.neatroots', 'checks', 's.yaml');
    write(file, countRule('s', 1));
    const registered = w.next((r) => ids(r).includes('s'));
    registerProject(home, { name: 'second', path: second, steering: false });
    const r = await registered;
    expect(ids(r)).toEqual(['d', 'f', 's']);
    expect(r.checks.find((c) => c.id === 's')?.applies_to).toEqual({ project: ['second'] });

    // Its folder is watched now: an edit to its check reloads it.
    const edited = w.next((r2) => r2.checks.some((c) => c.id === 's' && c.kind === 'rule' && c.rule.type === 'count' && c.rule.at_least === 3));
    await writeUntil(file, countRule('s', 3), edited);

    // Taken out of the registry: its check goes, the others (the demo's included) stay.
    const removed = w.next((r3) => !ids(r3).includes('s'));
    write(path.join(home, 'projects.json'), JSON.stringify([{ name: 'first', path: first }]));
    expect(ids(await removed)).toEqual(['d', 'f']);
    expect(w.errors).toEqual([]);
  });

  it('with load: false, loads nothing and says that something changed, still watching the folders of projects registered later', async () => {
    // As startCheckSet gives it: its own reload parses what changed (CheckParseCache), so the watcher parses nothing.
    const first = path.join(tmp, 'first');
    write(path.join(first, '.neatroots', 'checks', 'f.yaml'), countRule('f', 1));
    registerProject(home, { name: 'first', path: first, steering: false });
    const calls: unknown[][] = [];
    let told: () => void = () => undefined;
    const change = () => new Promise<void>((resolve) => (told = resolve));
    let reads = 0;
    stop = watchChecks({ library: false, home, projects: () => (reads++, readProjects(home)), load: false, debounceMs: 50 }, (...args: unknown[]) => {
      calls.push(args);
      told();
    });
    // Nothing loaded at the start: the projects read once, for the folders to watch.
    expect(reads).toBe(1);
    await writeUntil(path.join(first, '.neatroots', 'checks', 'f.yaml'), countRule('f', 2), change());
    expect(calls[0]).toEqual([]);

    const second = path.join(tmp, 'second');
    const file = path.join(second, '.neatroots', 'checks', 's.yaml');
    write(file, countRule('s', 1));
    const registered = change();
    registerProject(home, { name: 'second', path: second, steering: false });
    await registered;
    // Its folder is watched now: an edit to its check says so.
    const before = calls.length;
    await writeUntil(file, countRule('s', 3), change());
    expect(calls.length).toBeGreaterThan(before);
    expect(calls.every((c) => c.length === 0)).toBe(true);
  });

  it('debounces a burst of writes into one reload, and stops when closed', async () => {
    const file = path.join(home, 'checks', 'a.yaml');
    write(file, countRule('a', 1));
    // 1 s: a loaded machine that stalls the writes' 10 ms sleeps for a few hundred ms still
    // writes the whole burst within the debounce
    const w = watch({ debounceMs: 1_000 });
    const done = w.next((r) => r.checks.some((c) => c.kind === 'rule' && c.rule.type === 'count' && c.rule.at_least === 5));
    for (let n = 2; n <= 5; n++) {
      fs.writeFileSync(file, countRule('a', n));
      await sleep(10);
    }
    await done;
    await sleep(1_500);
    expect(w.results).toHaveLength(1);
    stop?.();
    fs.writeFileSync(file, countRule('a', 6));
    await sleep(1_500);
    expect(w.results).toHaveLength(1);
  });
});
