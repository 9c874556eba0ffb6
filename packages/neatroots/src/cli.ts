import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CheckError,
  checkProblems,
  loadChecks,
  neatrootsHome,
  parseCheckFile,
  listCheckFiles,
  readDisabledChecks,
  readProjects,
  registerProject,
  type Check,
  type LoadResult,
  type ProjectEntry,
} from '@neatroots/checks';
import { ConfigError, loadConfig, loadModelConfig, spanLimitsOf, type ModelConfig } from '@neatroots/platform';
import { JsonlError, LIMIT_VARIABLES, type SpanLimits } from '@neatroots/spans';
import { parseArgs, strings, UsageError, version, type FlagSpec } from './args';
import { CHECKS_AUTHORING } from './checks-authoring';
import { keysCommand } from './keys';
import { mcpCommand } from './mcp';
import { findingLine, readItems, Replayer, Summary } from './replay';

interface Command {
  usage: string;
  summary: string;
  help: string;
  flags: Record<string, FlagSpec>;
  run(p: ReturnType<typeof parseArgs>, io: Io): Promise<number>;
}

export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** Standard output as is, for a file printed byte for byte (sopops merge); out() ends each line. */
  write?(text: string): void;
  /** True once standard output's reader has gone (`| head -3`): what out() writes is dropped. */
  closed?(): boolean;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

const defaultIo: Io = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
  // Marked by bin/failure.js at its first failed write (EPIPE).
  closed: () => (process.stdout as unknown as Record<symbol, unknown>)[Symbol.for('neatroots.closedPipe')] === true,
  env: process.env,
  cwd: process.cwd(),
};

const commands: Record<string, Command> = {
  replay: {
    usage: 'neatroots replay [--checks DIR]... [--no-library] [--summary] FILE.jsonl...',
    summary: 'run the rule engine over recorded spans and print findings',
    help: `Runs the real rule engine over recorded spans and run events (JSON Lines, one span or
run event a line), each file in order, lines as they arrive, and prints the findings as
JSON Lines on standard output in the order they happen.

Question checks run too, answered by whatever model is configured: the decision model
(NEATROOTS_DECISION_MODEL_URL, _NAME, _KEY), else the local LLM (NEATROOTS_LLM_URL,
NEATROOTS_LLM_MODEL), else the built-in fast classifier (the default: no model needed, and
the same output on every run). See docs/questions.md.

Checks: the shipped library, ~/.neatroots/checks/ (or $NEATROOTS_HOME/checks/), registered
projects' .neatroots/checks/, then each --checks folder; later wins on the same id.

Each line is held to ingest's limits on what a span holds (NEATROOTS_MAX_JSON_DEPTH, _ATTRIBUTES,
_ATTRIBUTE_CHARS, _ITEM_CHARS, _TOKENS; docs/operations.md), but not to this machine's clock.

Options:
  --checks DIR    add a folder of checks (repeatable)
  --no-library    leave out the shipped library
  --summary       print one line per check and run with its final state instead

Exit status: 0; 2 for unreadable input, invalid checks or a bad setting (the reason on standard error).`,
    flags: { checks: { value: true, repeat: true }, 'no-library': {}, summary: {} },
    async run(p, io) {
      if (!p.positional.length) throw new UsageError('no span file given');
      for (const f of p.positional) {
        const abs = path.resolve(io.cwd, f);
        if (!fs.existsSync(abs)) {
          io.err(`neatroots replay: ${f}: no such file`);
          return 2;
        }
        if (fs.statSync(abs).isDirectory()) {
          io.err(`neatroots replay: ${f}: a folder, not a file of spans`);
          return 2;
        }
      }
      const home = neatrootsHome(io.env);
      const loaded = loadChecks({
        library: p.flags['no-library'] ? false : undefined,
        home,
        projects: registeredProjects(home),
        dirs: strings(p, 'checks').map((d) => path.resolve(io.cwd, d)),
      });
      for (const w of loaded.warnings) io.err(`warning: ${w}`);
      // The same models, routing and queues as the question service; ingest's limits on a line.
      let models: ModelConfig;
      let limits: SpanLimits;
      try {
        models = loadModelConfig(io.env);
        limits = replayLimits(io.env);
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        io.err(`neatroots replay: ${e.message}`);
        return 2;
      }
      const summary = p.flags.summary ? new Summary() : undefined;
      const replayer = new Replayer({
        checks: loaded.checks,
        onFinding: (f) => (summary ? summary.add(f) : io.out(JSON.stringify(findingLine(f)))),
        log: (m) => io.err(`warning: ${m}`),
        models,
        onNotChecked: (r) => io.err(`not checked: ${r.check_id} in run ${r.run_id} (${r.answer.reason || 'no answer'})`),
      });
      try {
        let stopped = false;
        for await (const item of readItems(p.positional.map((f) => path.resolve(io.cwd, f)), limits)) {
          // The reader of the findings has gone (`| head -3`): nothing more would be seen.
          if (!summary && io.closed?.()) {
            stopped = true;
            break;
          }
          await replayer.push(item);
        }
        if (!stopped) await replayer.end();
      } finally {
        await replayer.close();
      }
      if (summary) for (const line of summary.lines()) io.out(JSON.stringify(line));
      return 0;
    },
  },

  init: {
    usage: 'neatroots init [DIR] [--name NAME] [--steering | --no-steering]',
    summary: "register a project's .neatroots/checks/ folder",
    help: `Registers a project folder (default: the current one) so that the checks in its
.neatroots/checks/ are loaded, for that project only. Creates the folder with an example
check if it has none. Running it again updates the registration and keeps its steering
setting unless --steering or --no-steering is given. A project has one folder and a folder one
project: a NAME registered for another folder moves there (that folder's checks no longer
load), and a folder registered under another name is renamed; init says which, and when
steering on carries over.

Options:
  --name NAME     the project's name, as agents send it (default: the folder's name)
  --steering      let halt rules act in this project (default for a new project: off; flags only)
  --no-steering   halt rules only flag in this project

Exit status: 0; 2 when DIR is not a folder, its .neatroots or .neatroots/checks exists and is
not a folder, or the registry cannot be read (the reason on standard error).`,
    flags: { name: { value: true }, steering: {}, 'no-steering': {} },
    async run(p, io) {
      if (p.positional.length > 1) throw new UsageError('init takes at most one folder');
      if (p.flags.steering && p.flags['no-steering']) throw new UsageError('--steering and --no-steering contradict each other');
      const dir = path.resolve(io.cwd, p.positional[0] ?? '.');
      if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
        io.err(`neatroots init: ${dir}: not a folder`);
        return 2;
      }
      const name = (p.flags.name as string | undefined) ?? path.basename(dir);
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(name)) {
        io.err(`neatroots init: --name: "${name}" may only contain letters, digits, ".", "_" and "-"`);
        return 2;
      }
      const checksDir = path.join(dir, '.neatroots', 'checks');
      // A registry that cannot be read is said before anything is written, with how to repair
      // it: it is never written over (it lists the other projects).
      const before = registeredProjects(neatrootsHome(io.env), 'init');
      // .neatroots or .neatroots/checks there as a file: said, nothing written.
      for (const d of [path.dirname(checksDir), checksDir]) {
        if (fs.existsSync(d) && !fs.statSync(d).isDirectory()) {
          io.err(`neatroots init: ${d} exists and is not a folder`);
          return 2;
        }
      }
      fs.mkdirSync(checksDir, { recursive: true });
      if (!listCheckFiles(checksDir).length) {
        fs.writeFileSync(path.join(checksDir, 'example.yaml'), EXAMPLE_CHECK);
      }
      const home = neatrootsHome(io.env);
      // Neither flag: keep the project's current setting (off for a new one).
      const steering = p.flags.steering ? true : p.flags['no-steering'] ? false : undefined;
      const entry = registerProject(home, { name, path: dir, steering }).find((x) => x.name === name);
      io.out(`registered project ${name}: checks in ${checksDir} (steering ${entry?.steering ? 'on: halt rules act' : 'off: halt rules only flag'})`);
      // One folder per name and one name per folder: what this registration replaced, said.
      const moved = before.find((x) => x.name === name && x.path !== dir);
      if (moved) {
        io.out(`replaces project ${name}'s folder ${moved.path}: its checks there no longer load`);
        if (steering === undefined && moved.steering) io.out(`steering on carries over from it (--no-steering to turn it off)`);
      }
      const renamed = before.find((x) => x.path === dir && x.name !== name);
      if (renamed) {
        io.out(`replaces project ${renamed.name} in this folder: its checks now apply to ${name}`);
        if (steering === undefined && !before.some((x) => x.name === name) && renamed.steering) io.out(`steering on carries over from ${renamed.name} (--no-steering to turn it off)`);
      }
      io.out(`registry: ${path.join(home, 'projects.json')}`);
      return 0;
    },
  },

  checks: {
    usage: 'neatroots checks validate [--checks DIR]... [PATH...] | list [--json] [--no-library] [--no-demo] [--checks DIR]... | draft | preview | save | halt',
    summary: 'validate check files, list the checks in effect; draft, preview, save and halt checks on a server',
    help: `neatroots checks validate [--checks DIR]... [PATH...]
  Validates check files (YAML) and prints every problem, each with its file, check id and
  field (all of a check's problems, not just the first). PATH is a check file or a folder of
  them; each --checks folder is validated too. With no PATH: every source neatroots loads, and
  each --checks folder. Exit 0 when valid, 2 otherwise. Its only option is --checks.

neatroots checks list [--json] [--no-library] [--no-demo] [--checks DIR]...
  Lists the checks in effect from files: id, kind, action (flag or halt), source (library,
  user or project), file, the projects a project's own check applies to, and what each one
  overrides (a later source wins on the same id). Checks saved in a server's database are not
  read here: the app's Checks page and GET /v1/projects/{project}/checks list those.
  Includes the demo project's own checks, which "neatroots start" runs (leave them out with
  --no-demo, as "start --no-demo" does).
  A match check that a running neatroots disabled for a slow pattern says so, with the
  reason ("disabled" in --json), until that neatroots restarts.
  A check file that does not validate is left out, as "neatroots start" leaves it out: each
  of its problems on standard error, the rest listed, exit 2.
  --json prints one JSON document: { "checks": [...], "projects": [...] }, with "errors":
  [{ "file", "check_id"?, "field"?, "reason" }] when a file was left out.

Against a running server (docs/authoring.md); "neatroots checks SUBCOMMAND --help" for each:
${Object.entries(CHECKS_AUTHORING)
  .map(([k, c]) => `  ${k.padEnd(8)} ${c.summary}`)
  .join('\n')}`,
    flags: { json: {}, 'no-library': {}, 'no-demo': {}, checks: { value: true, repeat: true } },
    async run(p, io) {
      const [sub, ...rest] = p.positional;
      const home = neatrootsHome(io.env);
      // One table parses validate and list: a flag the subcommand does not read is refused, not ignored.
      const reads = sub && Object.hasOwn(CHECKS_FLAGS, sub) ? CHECKS_FLAGS[sub] : undefined;
      const unread = reads && Object.keys(p.flags).find((f) => !reads.includes(f));
      if (unread) throw new UsageError(`checks ${sub} has no option --${unread} (its options: ${reads.map((f) => `--${f}`).join(', ')})`);
      if (sub === 'validate') {
        let problems = 0;
        let count = 0;
        const warn: string[] = [];
        if (rest.length) {
          // The --checks folders are validated alongside the PATHs.
          for (const target of [...rest, ...strings(p, 'checks')].map((r) => path.resolve(io.cwd, r))) {
            if (!fs.existsSync(target)) {
              io.err(`${target}: no such file or folder`);
              problems++;
              continue;
            }
            const files = fs.statSync(target).isDirectory() ? listCheckFiles(target) : [target];
            for (const file of files) {
              try {
                const r = parseCheckFile(fs.readFileSync(file, 'utf8'), file, 'user');
                count += r.checks.length;
                warn.push(...r.warnings);
              } catch (e) {
                if (!(e instanceof CheckError)) throw e;
                // Every problem of every check, each on its own line.
                problems += checkProblems(e).length;
                io.err(e.message);
              }
            }
          }
        } else {
          // The registry's problem said once, as the other commands say it; its projects left out.
          let projects: ProjectEntry[] = [];
          try {
            projects = registeredProjects(home);
          } catch (e) {
            if (!(e instanceof RegistryError)) throw e;
            io.err(e.message);
            problems++;
          }
          const r = loadChecks({ home, projects, lenient: true, dirs: strings(p, 'checks').map((d) => path.resolve(io.cwd, d)) });
          count = r.checks.length;
          warn.push(...r.warnings);
          for (const e of r.errors) io.err(e.message);
          problems += r.errors.reduce((n, e) => n + checkProblems(e).length, 0);
        }
        for (const w of warn) io.err(`warning: ${w}`);
        io.out(problems ? `${problems} problem${problems === 1 ? '' : 's'} found` : `${count} check${count === 1 ? '' : 's'} valid`);
        return problems ? 2 : 0;
      }
      if (sub === 'list') {
        if (rest.length) throw new UsageError(`checks list takes no arguments, got ${rest.join(' ')} (add a folder with --checks DIR)`);
        const projects: ProjectEntry[] = registeredProjects(home);
        if (!p.flags['no-demo']) {
          // What `neatroots start` loads: the registered projects and the demo project.
          const { DEMO_PROJECT, DEMO_DIR } = await import('./embedded');
          if (!projects.some((x) => x.name === DEMO_PROJECT)) projects.push({ name: DEMO_PROJECT, path: DEMO_DIR, steering: true });
        }
        // Leniently, as `neatroots start` loads: a file that does not validate is left out (its
        // problems on standard error, and exit 2), the rest is listed.
        const r: LoadResult = loadChecks({
          home,
          projects,
          library: p.flags['no-library'] ? false : undefined,
          dirs: strings(p, 'checks').map((d) => path.resolve(io.cwd, d)),
          lenient: true,
        });
        for (const w of r.warnings) io.err(`warning: ${w}`);
        const problems = r.errors.flatMap((e) => checkProblems(e));
        for (const e of problems) io.err(e.message);
        const status = problems.length ? 2 : 0;
        const byKey = new Map<string, Check>(r.checks.map((c) => [`${c.id}\u0000${c.file ?? ''}`, c]));
        // Checks a running neatroots on this home switched off (a pattern over its time limit).
        const off = new Map(readDisabledChecks(home).map((d) => [`${d.check_id}\u0000${d.pattern}`, d]));
        const listed = r.entries.map((e) => {
          const c = byKey.get(`${e.id}\u0000${e.file ?? ''}`);
          const d = c?.kind === 'rule' && c.rule.type === 'match' ? off.get(`${c.id}\u0000${c.rule.pattern}`) : undefined;
          return { ...e, kind: c?.kind, action: c?.action, title: c?.title, ...(d ? { disabled: { reason: d.reason, since: d.since } } : {}) };
        });
        if (p.flags.json) {
          const errors = problems.map((e) => ({ file: e.file, ...(e.checkId ? { check_id: e.checkId } : {}), ...(e.field ? { field: e.field } : {}), reason: e.reason }));
          io.out(JSON.stringify({ checks: listed, projects, ...(errors.length ? { errors } : {}) }, null, 2));
          return status;
        }
        for (const e of listed) {
          const where = e.file ? path.relative(io.cwd, e.file) || e.file : 'database';
          const scope = e.projects ? ` [projects: ${e.projects.join(', ')}]` : e.except_projects ? ` [not in: ${e.except_projects.join(', ')}]` : '';
          io.out(`${e.id}  ${e.kind ?? ''}  ${e.action ?? ''}  ${e.source}  ${where}${scope}`);
          for (const o of e.overrides) io.out(`    overrides ${o.source} ${o.file ? path.relative(io.cwd, o.file) || o.file : 'database'}`);
          if (e.disabled) io.out(`    disabled: ${e.disabled.reason} (since ${e.disabled.since})`);
        }
        if (projects.length) io.out(`projects: ${projects.map((x) => `${x.name} (steering ${x.steering ? 'on' : 'off'})`).join(', ')}`);
        return status;
      }
      throw new UsageError(sub ? `unknown checks command "${sub}"` : `checks needs a command: validate, list, ${Object.keys(CHECKS_AUTHORING).join(', ')}`);
    },
  },
};

/** The flags `checks validate` and `checks list` read, of the checks command's one table. */
const CHECKS_FLAGS: Record<string, readonly string[]> = {
  validate: ['checks'],
  list: ['json', 'no-library', 'no-demo', 'checks'],
};

commands.start = {
  usage: 'neatroots start [--no-demo]',
  summary: 'run everything in one process (the embedded default) and replay a sample fleet',
  help: `Starts ingest (OTLP/gRPC and the neatroots gRPC API), the rule engine, question, review and the
HTTP API in one process, with the in-process bus (a durable log), journaled run windows and an
embedded Postgres (PGlite), all in $NEATROOTS_DATA_DIR (default $NEATROOTS_HOME/data; home is
~/.neatroots unless set). Nothing else needs to be installed. Then it replays a bundled sample fleet
through the real gRPC ingest and prints the findings, notes and halts as they happen, and keeps
serving until interrupted.

Options:
  --no-demo       do not replay the sample fleet

Environment: NEATROOTS_HOST, NEATROOTS_OTLP_PORT (4317), NEATROOTS_OTLP_HTTP_PORT (4318), NEATROOTS_GRPC_PORT (50051),
NEATROOTS_HTTP_PORT (8080), NEATROOTS_ADMIN_PORT (9464: /healthz, /readyz, /metrics), NEATROOTS_API_KEYS (project=key,...; project=key:ingest for agents), NEATROOTS_STEERING
(projects where halts act), NEATROOTS_HOME, NEATROOTS_DATA_DIR, NEATROOTS_BUS (log; memory), NEATROOTS_WINDOWS
(journal; memory).

Exit status: 0 once stopped by a signal; 1 when a part stopped for good and NEATROOTS_ON_FAILING
is exit; 2 for a bad setting, a port in use or a data folder another neatroots is using (the
reason on standard error).`,
  flags: { 'no-demo': {} },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`start takes no arguments, got ${p.positional.join(' ')}`);
    const { runEmbedded } = await import('./start');
    return runEmbedded({ demo: !p.flags['no-demo'], io });
  },
};

commands.serve = {
  usage: 'neatroots serve --target ingest|rule-engine|question|review|api|all',
  summary: 'run one service (or all) of the distributed deployment, on Kafka, Redis and Postgres',
  help: `Runs one service of the distributed deployment in this process, or all of them
(--target all: the services of \`neatroots start\`, on these servers instead of in-process
ones). Kafka (NEATROOTS_KAFKA_BROKERS) for every service but the api, Redis
(NEATROOTS_REDIS_URL) for the rule engine, question and review (its jobs), Postgres
(NEATROOTS_PG_URL) for review only: review owns the database and the others ask it over gRPC
(NEATROOTS_REVIEW_ADDR); the api asks question (NEATROOTS_QUESTION_ADDR). Each process serves
grpc.health.v1 on its service port (review: NEATROOTS_REVIEW_PORT, question:
NEATROOTS_QUESTION_PORT, else NEATROOTS_SERVICE_PORT) and /healthz, /readyz and /metrics on
NEATROOTS_ADMIN_PORT (9464). Logs go to standard error: readable (pretty) when it is a terminal,
else JSON lines, one object a line; NEATROOTS_LOG_FORMAT=json or pretty chooses, and
NEATROOTS_LOG_LEVEL the least severe line written. SIGTERM, SIGINT or SIGHUP stops it
gracefully (a second one stops it at once). Configuration is validated at start-up.`,
  flags: { target: { value: true } },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`serve takes no arguments, got ${p.positional.join(' ')}`);
    const target = p.flags.target as string | undefined;
    const { runServe, TARGETS } = await import('./serve');
    if (!target || !(TARGETS as readonly string[]).includes(target)) throw new UsageError(`--target must be one of ${TARGETS.join(', ')}`);
    return runServe(target as (typeof TARGETS)[number], io);
  },
};

commands.mcp = mcpCommand;
commands.keys = keysCommand;

/**
 * The NEATROOTS_MAX_* limits of the environment, as ingest reads them (spanLimitsOf), for
 * replay. Only those variables are read: a setting replay does not use (a port) cannot stop it.
 * NEATROOTS_MAX_FUTURE_MS is left out: replay never holds a recorded time to this clock.
 * A bad value throws ConfigError.
 */
function replayLimits(env: NodeJS.ProcessEnv): SpanLimits {
  const read = Object.entries(LIMIT_VARIABLES)
    .filter(([limit, name]) => limit !== 'maxFutureMs' && env[name] !== undefined)
    .map(([, name]) => [name, env[name]]);
  return spanLimitsOf(loadConfig(Object.fromEntries(read)));
}

/** `<home>/projects.json` could not be read: said as a plain message, exit 2. */
class RegistryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RegistryError';
  }
}

/**
 * The registered projects (`<home>/projects.json`), or a RegistryError naming the file and
 * why; for init, with how to repair it (init never writes over a registry it cannot read).
 */
function registeredProjects(home: string, forCommand?: 'init'): ProjectEntry[] {
  try {
    return readProjects(home);
  } catch (e) {
    const file = path.join(home, 'projects.json');
    const msg = (e as Error).message;
    const said = msg.includes(file) ? msg : `${file}: ${msg}`;
    throw new RegistryError(
      forCommand === 'init'
        ? `${said}\nFix it by hand, or move it aside (mv ${file} ${file}.broken) and run neatroots init again in each project folder.`
        : said,
    );
  }
}

const EXAMPLE_CHECK = `# A rule check (see docs/checks.md). Edit or replace it; neatroots reloads on save.
id: example-repeated-search
kind: rule
title: Same search repeated
rule:
  type: repeat
  span: { type: [tool, mcp_tool], tool: [search] }
  same: [tool, input]
  at_least: 3
guidance: >-
  You have searched {count} times with the same query ({args}). Try a different query or answer with what you have.
action: flag
`;

function topHelp(): string {
  const width = Math.max(...Object.keys(commands).map((k) => k.length));
  return `neatroots: live checks for fleets of AI agents

Usage: neatroots <command> [options]

Commands:
${Object.entries(commands)
  .map(([k, c]) => `  ${k.padEnd(width)}  ${c.summary}`)
  .join('\n')}

Run "neatroots <command> --help" (or "neatroots help <command>") for a command's options,
"neatroots --version" for the version.`;
}

export { version };

export async function main(argv: readonly string[], io: Io = defaultIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    io.out(version());
    return 0;
  }
  // No command is a usage error: the help on standard error, exit 2; asked for, on standard output.
  if (!name) {
    io.err(topHelp());
    return 2;
  }
  if (name === '--help' || name === '-h' || (name === 'help' && !rest.length)) {
    io.out(topHelp());
    return 0;
  }
  // `help replay` is `replay --help`; `help checks draft` and `checks help draft`, `checks draft --help`.
  if (name === 'help') return main([...rest, '--help'], io);
  if (name === 'checks' && rest[0] === 'help') return main(['checks', ...rest.slice(1), '--help'], io);
  // `checks draft|preview|save|halt` are commands of their own (their flags, their --help).
  const authoring = name === 'checks' && Object.prototype.hasOwnProperty.call(CHECKS_AUTHORING, rest[0] ?? '') ? CHECKS_AUTHORING[rest[0]] : undefined;
  const cmd = authoring ?? commands[name];
  const args = authoring ? rest.slice(1) : rest;
  if (!cmd) {
    io.err(`neatroots: unknown command "${name}"\n\n${topHelp()}`);
    return 2;
  }
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`Usage: ${cmd.usage}\n\n${cmd.help}`);
    return 0;
  }
  try {
    return await cmd.run(parseArgs(args, cmd.flags), io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`neatroots ${name}: ${e.message}\nUsage: ${cmd.usage}`);
      return 2;
    }
    if (e instanceof CheckError || e instanceof JsonlError) {
      io.err(`neatroots ${name}: ${e.message}`);
      return 2;
    }
    if (e instanceof RegistryError) {
      io.err(`neatroots ${name}: ${e.message}`);
      return 2;
    }
    const code = (e as NodeJS.ErrnoException).code;
    // A FILE missing, unreadable or a folder (checks save DIR), a path through a file
    // (ENOTDIR) or a file where a folder is made (EEXIST): exit 2, as sopc and sopops.
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR' || code === 'ENOTDIR' || code === 'EEXIST') {
      io.err(`neatroots ${name}: ${(e as Error).message}`);
      return 2;
    }
    throw e;
  }
}

export type { Command };
