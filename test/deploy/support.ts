/**
 * Shared by the deployment checks in test/deploy: compose-style interpolation, durations, and
 * where the outside tools (helm, docker compose) are.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import * as path from 'node:path';

export const repoRoot = path.resolve(__dirname, '../..');

/** Where scripts/helm.sh puts the tools it builds. */
export function toolsBinDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(env.NEATROOTS_TOOLS_DIR || path.join(homedir(), '.cache/neatroots-tools'), 'bin');
}

/** CI sets NEATROOTS_REQUIRE_SERVICES=1: then a missing tool fails instead of skipping. */
export function toolsRequired(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.NEATROOTS_REQUIRE_SERVICES === '1' || env.NEATROOTS_REQUIRE_SERVICES === 'true';
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

/** The helm binary: $NEATROOTS_HELM, then the one scripts/helm.sh built, then helm on PATH. */
export function findHelm(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.NEATROOTS_HELM) return existsSync(env.NEATROOTS_HELM) ? env.NEATROOTS_HELM : undefined;
  const built = path.join(toolsBinDir(env), 'helm');
  if (existsSync(built)) return built;
  return onPath('helm', env);
}

/**
 * A `docker compose` that can run `config` (it needs no engine): the docker CLI plugin, or a
 * standalone docker-compose on PATH or in the tools folder. Undefined when there is none.
 */
export function findCompose(env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  const plugin = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8', env });
  if (plugin.status === 0) return ['docker', 'compose'];
  for (const bin of [path.join(toolsBinDir(env), 'docker-compose'), onPath('docker-compose', env)]) {
    if (bin && existsSync(bin) && spawnSync(bin, ['version'], { encoding: 'utf8', env }).status === 0) return [bin];
  }
  return undefined;
}

/**
 * Compose's variable interpolation (the subset docker compose documents): $$, $VAR, ${VAR},
 * ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}, ${VAR:+alt}, ${VAR+alt}.
 * Throws on a required variable that is missing, as docker compose does.
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$(\$|[A-Za-z_][A-Za-z0-9_]*|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?+])([^}]*))?\})/g,
    (whole, simple: string, name: string | undefined, colon: string | undefined, op: string | undefined, arg: string | undefined) => {
      if (simple === '$') return '$';
      if (!whole.startsWith('${')) return env[simple] ?? '';
      const v = env[name as string];
      const missing = colon ? !v : v === undefined;
      switch (op) {
        case '-': return missing ? interpolate(arg ?? '', env) : (v as string);
        case '?': if (missing) throw new Error(`required variable ${name} is missing: ${arg}`); return v as string;
        case '+': return missing ? '' : interpolate(arg ?? '', env);
        default: return v ?? '';
      }
    });
}

/** A compose/Go duration ("1m30s", "5s", "500ms") in milliseconds. */
export function durationMs(s: string): number {
  const parts = [...s.matchAll(/(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g)];
  if (!parts.length || parts.map((p) => p[0]).join('') !== s) throw new Error(`not a duration: ${s}`);
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, ns: 1e-6 };
  return parts.reduce((ms, p) => ms + Number(p[1]) * unit[p[2]], 0);
}

/** Prints one line saying why a check is skipped (stderr: shown even with jest --silent). */
export function skipLine(suite: string, why: string): void {
  process.stderr.write(`skipping ${suite}: ${why}\n`);
}
