import * as fs from 'node:fs';
import * as path from 'node:path';
import { disabledChecks, DisabledChecks, disabledIn, type DisabledCheck } from './disabled';

/**
 * Disabled checks are a fact about a running process, but `neatroots checks list` runs in
 * another one. Each process that evaluates checks keeps its list in
 * `<home>/state/disabled-checks/<pid>.json` (rewritten on every change, removed when it
 * stops), and readers take the files of processes still alive: a restart clears the list,
 * as the seed says ("until neatroots restarts").
 */
export function disabledChecksDir(home: string): string {
  return path.join(home, 'state', 'disabled-checks');
}

interface StateFile {
  pid: number;
  started_at: string;
  checks: DisabledCheck[];
}

/** Keeps this process's file in step with `list`; returns the function that stops and removes it. */
export function recordDisabledChecks(home: string, list: DisabledChecks, onError?: (err: unknown) => void): () => void {
  const dir = disabledChecksDir(home);
  const file = path.join(dir, `${process.pid}.json`);
  const started_at = new Date().toISOString();
  const write = (checks: DisabledCheck[]) => {
    try {
      fs.mkdirSync(dir, { recursive: true });
      const body: StateFile = { pid: process.pid, started_at, checks };
      // Written aside and renamed: a reader never sees half a file.
      fs.writeFileSync(`${file}.tmp`, JSON.stringify(body, null, 2));
      fs.renameSync(`${file}.tmp`, file);
    } catch (err) {
      onError?.(err);
    }
  };
  // A file left by an earlier process with this pid is not ours.
  fs.rmSync(file, { force: true });
  if (list.list().length) write(list.list());
  const stop = list.onChange(write);
  return () => {
    stop();
    fs.rmSync(file, { force: true });
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * What a project's API shows: the checks that run in `project` disabled in this process or in
 * any running neatroots on `home` (the rule engine may run apart from the API, on the same
 * machine), and those in `more` (the rule engines on other machines: sharedDisabledChecks), each once.
 */
export function disabledChecksFor(home: string, project: string, more: readonly DisabledCheck[] = []): DisabledCheck[] {
  const seen = new Set<string>();
  const out: DisabledCheck[] = [];
  for (const d of [...disabledChecks.list(), ...readDisabledChecks(home), ...more]) {
    const k = DisabledChecks.key(d.check_id, d.pattern, d);
    if (seen.has(k) || !disabledIn(d, project)) continue;
    seen.add(k);
    out.push(d);
  }
  return out;
}

/** The checks disabled in every running process on this home, each once. */
export function readDisabledChecks(home: string): DisabledCheck[] {
  const dir = disabledChecksDir(home);
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((n) => /^\d+\.json$/.test(n));
  } catch {
    return [];
  }
  const out = new Map<string, DisabledCheck>();
  for (const name of names) {
    const pid = Number(name.slice(0, -5));
    if (!alive(pid)) continue;
    try {
      const body = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as StateFile;
      for (const c of body.checks ?? []) {
        const k = DisabledChecks.key(c.check_id, c.pattern, c);
        if (!out.has(k)) out.set(k, c);
      }
    } catch {
      // Being rewritten or not ours: the next read sees it.
    }
  }
  return [...out.values()];
}
