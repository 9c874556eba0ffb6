import * as fs from 'node:fs';
import * as path from 'node:path';
import { apiCall, ApiCallError, type ApiCheckProblem } from './api-client';
import { strings, UsageError, type FlagSpec, type Parsed } from './args';
import type { Command, Io } from './cli';

/**
 * `neatroots checks draft | preview | save | halt`: writing checks against a running server
 * (docs/authoring.md), through the same endpoints as the app. Every refusal is printed as the
 * API words it, a check that does not validate as FILE:LINE: field: reason lines; exit 1.
 */

const FLAGS: Record<string, FlagSpec> = { url: { value: true }, key: { value: true }, project: { value: true } };

const SERVER_HELP = `Server: --url URL (default NEATROOTS_URL, else http://127.0.0.1:8080); API key: --key KEY
(default NEATROOTS_API_KEY); project: --project P (default NEATROOTS_PROJECT).`;

interface Target {
  url: string;
  key: string;
  project: string;
}

function last(p: Parsed, name: string): string | undefined {
  const v = strings(p, name);
  return v.length ? v[v.length - 1] : undefined;
}

function target(p: Parsed, io: Io): Target {
  const url = (last(p, 'url') ?? io.env.NEATROOTS_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(url)) throw new UsageError(`--url must be an http(s) URL, got ${url}`);
  const key = last(p, 'key') ?? io.env.NEATROOTS_API_KEY;
  if (!key) throw new UsageError('an API key is needed: --key KEY or NEATROOTS_API_KEY');
  const project = last(p, 'project') ?? io.env.NEATROOTS_PROJECT;
  if (!project) throw new UsageError('which project: --project P or NEATROOTS_PROJECT');
  return { url, key, project };
}

function checksPath(t: Target, rest = ''): string {
  return `/v1/projects/${encodeURIComponent(t.project)}/checks${rest}`;
}

function count(p: Parsed, name: string, max: number): number | undefined {
  const v = last(p, name);
  if (v === undefined) return undefined;
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(n >= 1 && n <= max)) throw new UsageError(`--${name} must be an integer from 1 to ${max}`);
  return n;
}

function one(p: Parsed, what: string): string {
  const [arg, ...extra] = p.positional;
  if (!arg) throw new UsageError(`${what} is missing`);
  if (extra.length) throw new UsageError(`one ${what} only, got also ${extra.join(' ')}`);
  return arg;
}

/**
 * A refusal: the API's words; a check that does not validate as `METHOD URL: status code`, then
 * one FILE:LINE: check ID: field: reason line per problem (the API's message lists the same
 * problems again, so it is left out).
 */
function refused(err: unknown, io: Io, file?: string): number {
  if (!(err instanceof ApiCallError)) throw err;
  const head = err.problems.length ? /^\S+ \S+: \d{3} [^\s:]+/.exec(err.message)?.[0] : undefined;
  io.err(`neatroots checks: ${head ?? err.message}`);
  for (const l of err.lines) io.err(l);
  for (const pr of err.problems) io.err(problemLine(pr, file));
  return 1;
}

function problemLine(pr: ApiCheckProblem, file?: string): string {
  const where = file ? `${file}${pr.line !== undefined ? `:${pr.line}` : ''}: ` : pr.line !== undefined ? `line ${pr.line}: ` : '';
  return `${where}${pr.check_id ? `check ${pr.check_id}: ` : ''}${pr.field ? `${pr.field}: ` : ''}${pr.reason}`;
}

/** FILE's text; a folder given as FILE is said as such (EISDIR: exit 2, as a missing FILE). */
function readCheckFile(io: Io, file: string): string {
  try {
    return fs.readFileSync(path.resolve(io.cwd, file), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EISDIR') throw Object.assign(new Error(`${file}: a folder, not a check file`), { code: 'EISDIR' });
    throw e;
  }
}

interface Listed {
  id: string;
  kind?: string;
  action?: string;
  source: string;
  origin?: string;
  in_effect: boolean;
  error?: string;
}

interface Saved {
  check: Listed;
  created: boolean;
  warnings: string[];
  steering?: boolean;
}

interface Preview {
  check: { id: string };
  warnings: string[];
  runs: { checked: number; flagged: number; more: boolean };
  model_calls: { used: number; limit: number; exhausted: boolean };
  flagged: { run_id: string; workflow: string | null; findings: { check_id: string; status: string; count: number; title: string; quote?: string }[] }[];
  not_checked: { run_id: string; reason: string }[];
  bounds: string;
}

export const CHECKS_AUTHORING: Record<string, Command> = {
  draft: {
    usage: 'neatroots checks draft "CONCERN" [--workflow W] [--url URL] [--key KEY] [--project P]',
    summary: 'draft a check from a concern in plain words (not saved)',
    help: `Asks the running server to draft a check from a concern, in plain words, and prints it as
YAML on standard output (redirect it to a file to preview and save it). The LLM drafts a rule
when the concern is an order of calls ("refunds without an order lookup") or a limit, else a
question; a question about what the agent told the user is given the answer to see. Warnings
go to standard error. Needs an LLM configured on the server.

  --workflow W    the check applies to this workflow only

${SERVER_HELP}
Exit status: 0; 1 when the server refuses (its reason on standard error); 2 for bad usage.`,
    flags: { ...FLAGS, workflow: { value: true } },
    async run(p, io) {
      const concern = one(p, 'the concern');
      const t = target(p, io);
      try {
        const workflow = last(p, 'workflow');
        const d = await apiCall<{ yaml: string; kind: string; warnings: string[] }>(t, 'POST', checksPath(t, '/draft'), { json: { concern, ...(workflow ? { workflow } : {}) } });
        for (const w of d.warnings) io.err(`warning: ${w}`);
        io.out(d.yaml.trimEnd());
        return 0;
      } catch (err) {
        return refused(err, io);
      }
    },
  },

  preview: {
    usage: 'neatroots checks preview FILE [--runs N] [--model-calls N] [--json] [--url URL] [--key KEY] [--project P]',
    summary: "show which of the project's recent runs a check would flag",
    help: `Sends the check in FILE (YAML, one check) to the running server, which replays the
project's most recent runs through the real rule engine and question path with it, and prints
the runs it would flag with the findings it would raise. Nothing is saved. Bounded: at most
--runs runs (default 20, at most 100), --model-calls model calls for a question (default 20,
at most 200), and 120 s: past it the server answers with what it covered, the rest listed as
not checked; the last line says what was covered.

  --runs N          how many recent runs
  --model-calls N   how many model calls a question may make
  --json            print the server's answer as JSON

${SERVER_HELP}
Exit status: 0; 1 when the check does not validate (FILE:LINE: field: reason on standard error)
or the server refuses; 2 for bad usage or an unreadable FILE.`,
    flags: { ...FLAGS, runs: { value: true }, 'model-calls': { value: true }, json: {} },
    async run(p, io) {
      const file = one(p, 'FILE');
      const t = target(p, io);
      const runs = count(p, 'runs', 100);
      const calls = count(p, 'model-calls', 200);
      const yaml = readCheckFile(io, file);
      let r: Preview;
      try {
        r = await apiCall<Preview>(t, 'POST', checksPath(t, '/preview'), { json: { yaml, by: 'cli', ...(runs ? { runs } : {}), ...(calls ? { model_calls: calls } : {}) } }, {
          // The server stops a preview whose caller has gone, and answers within its own bound (120 s) before this.
          afterTimeout: 'the server stops a preview once its caller has gone, so it is not running any more; try fewer --runs or --model-calls, or see whether the server and its model are overloaded',
        });
      } catch (err) {
        return refused(err, io, file);
      }
      if (p.flags.json) {
        io.out(JSON.stringify(r, null, 2));
        return 0;
      }
      for (const w of r.warnings) io.err(`warning: ${w}`);
      io.out(`${r.check.id} would flag ${r.runs.flagged} of ${r.runs.checked} run${r.runs.checked === 1 ? '' : 's'}`);
      for (const run of r.flagged) {
        io.out(`  ${run.run_id}${run.workflow ? ` (${run.workflow})` : ''}`);
        for (const f of run.findings) io.out(`    ${f.status} ${f.title} (count ${f.count})${f.quote ? `: "${f.quote}"` : ''}`);
      }
      for (const n of r.not_checked) io.out(`  not checked: ${n.run_id} (${n.reason})`);
      io.out(r.bounds);
      return 0;
    },
  },

  save: {
    usage: 'neatroots checks save FILE [--url URL] [--key KEY] [--project P]',
    summary: 'save a check to the project (a database check, in effect at once)',
    help: `Saves the check in FILE (YAML, one check) to the project on the running server, as a
database check of yours: created, or replacing your check with the same id. It is in effect
in the rule engine at once, in that project only. The YAML is stored as written. Warnings go
to standard error: one says when the check replaced halted (checks halt) and FILE has no
action: halt, so it now only flags.

${SERVER_HELP}
Exit status: 0; 1 when the check does not validate (FILE:LINE: field: reason on standard error)
or the server refuses; 2 for bad usage or an unreadable FILE.`,
    flags: FLAGS,
    async run(p, io) {
      const file = one(p, 'FILE');
      const t = target(p, io);
      const yaml = readCheckFile(io, file);
      try {
        const r = await apiCall<Saved>(t, 'POST', checksPath(t), { json: { yaml, by: 'cli' } });
        for (const w of r.warnings) io.err(`warning: ${w}`);
        io.out(`${r.created ? 'saved' : 'replaced'} check ${r.check.id} in project ${t.project}${r.check.in_effect ? ' (in effect)' : `: not in effect (${r.check.error ?? 'unknown'})`}`);
        return 0;
      } catch (err) {
        return refused(err, io, file);
      }
    },
  },

  halt: {
    usage: 'neatroots checks halt ID [--url URL] [--key KEY] [--project P]',
    summary: 'switch a saved rule to action: halt',
    help: `Switches the rule ID, a database check of the project (checks save), to action: halt: when
it fires, the agent is halted. A flag rule a coding agent saved can be switched too: it is
stored as yours from then on, so no agent can change it. Refused for a library check (save
your own version and halt that), a check in a file (set action: halt there), a question (only
rules halt) and a check the planner wrote (save it as your own first). Halts act only in a
project with steering on (neatroots init --steering, or NEATROOTS_STEERING); it says when
steering is off.

${SERVER_HELP}
Exit status: 0; 1 when the server refuses (its reason on standard error); 2 for bad usage.`,
    flags: FLAGS,
    async run(p, io) {
      const id = one(p, 'ID');
      const t = target(p, io);
      try {
        const r = await apiCall<Saved>(t, 'POST', checksPath(t, `/${encodeURIComponent(id)}/halt`), { json: { by: 'cli' } });
        io.out(`check ${r.check.id} now halts in project ${t.project}`);
        if (r.steering === false) io.out(`steering is off in project ${t.project}: the rule flags until it is on (neatroots init --steering, or NEATROOTS_STEERING)`);
        return 0;
      } catch (err) {
        return refused(err, io);
      }
    },
  },
};
