import * as fs from 'node:fs';
import * as path from 'node:path';

/** The CLIs' version (neatroots, sopc and sopops alike): the package's, read beside src/ and dist/. */
export function version(): string {
  return (JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
}

/** A usage error: the CLI prints it with the command's help and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * A failure the user can put right (an output path in a folder that does not exist): the CLI
 * prints its message alone, with no usage or stack, and exits 2.
 */
export class CommandError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandError';
  }
}

export interface FlagSpec {
  /** Takes a value (`--checks DIR`); repeatable ones collect every value. */
  value?: boolean;
  repeat?: boolean;
}

export interface Parsed {
  flags: Record<string, string | string[] | boolean>;
  positional: string[];
}

/**
 * Parses `--flag`, `--flag VALUE`, `--flag=VALUE`. Usage errors: an unknown flag, an empty value,
 * a flag given twice that is not repeatable (`--out a --out b` would keep only one of them), and
 * a separate value that is an option itself (`--name --steering`: the value was left out, and
 * the next option would be swallowed as it); `--name=--steering` says it is meant. A value of
 * `-` alone (standard output) or a negative number is taken as given.
 */
export function parseArgs(argv: readonly string[], spec: Record<string, FlagSpec>): Parsed {
  const flags: Parsed['flags'] = {};
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith('--') || a === '-') {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    const s = Object.hasOwn(spec, name) ? spec[name] : undefined;
    if (!s) throw new UsageError(`unknown option --${name}`);
    // Its values are not said: one may be an API key (--key).
    if (!s.repeat && Object.hasOwn(flags, name)) throw new UsageError(`--${name} given twice: give it once`);
    if (!s.value) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    let v: string | undefined;
    if (eq >= 0) v = a.slice(eq + 1);
    else {
      v = argv[++i];
      if (v === undefined) throw new UsageError(`--${name} needs a value`);
      if (/^-[A-Za-z-]/.test(v)) throw new UsageError(`--${name} needs a value, got the option ${v}; write --${name}=${v} if you mean it`);
    }
    // No flag of these programs means anything by an empty value: `--procedure ""` would
    // otherwise read as no --procedure at all (every procedure).
    if (v === '') throw new UsageError(`--${name} needs a value, got an empty one`);
    if (s.repeat) ((flags[name] as string[] | undefined) ?? (flags[name] = [] as string[]) as string[]).push(v);
    else flags[name] = v;
  }
  return { flags, positional };
}

export function strings(p: Parsed, name: string): string[] {
  const v = p.flags[name];
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}
