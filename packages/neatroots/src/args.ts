/** A usage error: the CLI prints it with the command's help and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
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

/** Parses `--flag`, `--flag VALUE`, `--flag=VALUE`; unknown flags and empty values are usage errors. */
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
    const s = spec[name];
    if (!s) throw new UsageError(`unknown option --${name}`);
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
