import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '@neatroots/platform';
import { UsageError } from './args';
import type { Command } from './cli';

/** The scopes a key of NEATROOTS_API_KEYS may have: everything (the default), or spans only (agents). */
const SCOPES = ['api', 'ingest'] as const;

/**
 * A new API key: `nr_` and 24 random bytes (192 bits) in base64url, as review makes the demo's
 * (createApiKey). Letters, digits, `-` and `_` only: nothing NEATROOTS_API_KEYS, a URL or a shell
 * reads apart (`,` `=` `:`), and never starting with `-` (not taken for an option).
 */
export function newApiKey(): string {
  return `nr_${randomBytes(24).toString('base64url')}`;
}

/**
 * What is wrong with `project` as the project of a NEATROOTS_API_KEYS entry, as review reads the
 * setting (libs/platform config): entries are split at `,`, a project ends at the first `=`, and
 * an entry's spaces around it are dropped. Undefined when review reads it as given.
 */
export function projectProblem(project: string): string | undefined {
  if (!project.trim()) return 'is empty: give the project the key opens, as agents send it';
  if (project.includes(',')) return `"${project}" holds a ",", which separates the entries of NEATROOTS_API_KEYS`;
  if (project.includes('=')) return `"${project}" holds a "=", which ends the project of an entry (project=key)`;
  if (project.trim() !== project) return `"${project}" begins or ends with a space, which review drops`;
  return undefined;
}

/** `neatroots keys new`: a key of adequate strength and the NEATROOTS_API_KEYS entry that gives it. */
export const keysCommand: Command = {
  usage: 'neatroots keys new --project NAME [--scope api|ingest] [--json]',
  summary: 'make a new random API key and the NEATROOTS_API_KEYS entry that gives it',
  help: `Makes a new API key (nr_ and 24 random bytes, base64url: 192 bits) and prints it, then the
entry to add to NEATROOTS_API_KEYS (entries separated by ","), which gives it to the project:

  key: nr_...
  entry: NAME=nr_...          (NAME=nr_...:ingest with --scope ingest)

Nothing is stored: the key opens the project once the entry is in NEATROOTS_API_KEYS and
review (neatroots start, or neatroots serve --target review) has started with it. With the
helm chart, give the key as apiKeys.NAME (ingestKeys.NAME for --scope ingest) instead.

Options:
  --project NAME   the project the key opens, as agents send it (required)
  --scope SCOPE    api (the default: the REST API, MCP, and sending spans) or ingest (an
                   agent's key: sending spans, notes and halts, pre-call checks; the REST API
                   and MCP refuse it)
  --json           one JSON object instead: {"project", "scope", "key", "entry"}

Exit status: 0; 2 for a missing or invalid --project or --scope (the reason on standard error).`,
  flags: { project: { value: true }, scope: { value: true }, json: {} },
  async run(p, io) {
    const [sub, ...rest] = p.positional;
    if (sub !== 'new') throw new UsageError(sub ? `unknown keys command "${sub}" (its command: new)` : 'keys needs a command: new');
    if (rest.length) throw new UsageError(`keys new takes no arguments, got ${rest.join(' ')}`);
    const project = p.flags.project;
    if (typeof project !== 'string') throw new UsageError('--project NAME is required: the project the key opens');
    const problem = projectProblem(project);
    if (problem) throw new UsageError(`--project ${problem}`);
    const scope = p.flags.scope;
    if (scope !== undefined && !(SCOPES as readonly unknown[]).includes(scope)) throw new UsageError(`--scope must be api or ingest, got ${JSON.stringify(scope)}`);
    const key = newApiKey();
    const entry = `${project}=${key}${scope === 'ingest' ? ':ingest' : ''}`;
    // Read back as review reads the setting: what it gives is this project, key and scope.
    let read: unknown;
    try {
      read = loadConfig({ NEATROOTS_API_KEYS: entry }).NEATROOTS_API_KEYS;
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      throw new UsageError(`--project "${project}" does not make an entry review takes: ${e.message}`);
    }
    const expected = [scope === 'ingest' ? { project, key, scope: 'ingest' } : { project, key }];
    if (JSON.stringify(read) !== JSON.stringify(expected)) throw new UsageError(`--project "${project}" does not make an entry review reads back as that project`);
    if (p.flags.json) io.out(JSON.stringify({ project, scope: scope ?? 'api', key, entry }));
    else {
      io.out(`key: ${key}`);
      io.out(`entry: ${entry}`);
    }
    return 0;
  },
};
