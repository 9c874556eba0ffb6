import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { servicesRequired } from './services';

/**
 * The Python interpreter of the tests that drive Python code (the OpenTelemetry Python SDK
 * over OTLP/HTTP, the Python client), as services.ts finds the real services:
 *
 * 1. NEATROOTS_PYTHON (what .ci/run sets from scripts/python-env.sh);
 * 2. otherwise the venv scripts/python-env.sh makes, at its default place;
 * 3. otherwise, or when the modules do not import, the suite is skipped with one line on
 *    stderr saying what to run; with NEATROOTS_REQUIRE_SERVICES=1 it fails instead.
 */
export function findPython(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.NEATROOTS_PYTHON?.trim()) return env.NEATROOTS_PYTHON.trim();
  const venv = join(env.NEATROOTS_PYTHON_ENV ?? join(homedir(), '.cache', 'neatroots', 'python-env'), 'bin', 'python');
  return existsSync(venv) ? venv : undefined;
}

/** The interpreter when it imports every module, or undefined after one skip line (throws in CI). */
export function pythonOrSkip(suite: string, modules: string[], env: NodeJS.ProcessEnv = process.env): string | undefined {
  const python = findPython(env);
  let why = 'no Python environment: run scripts/python-env.sh (or set NEATROOTS_PYTHON)';
  if (python) {
    const r = spawnSync(python, ['-c', `import ${modules.join(', ')}`], { encoding: 'utf8', timeout: 60_000 });
    if (r.status === 0) return python;
    why = `${python} cannot import ${modules.join(', ')} (${(r.stderr || r.error?.message || '').trim().split('\n').pop()}): run scripts/python-env.sh`;
  }
  if (servicesRequired(env)) throw new Error(`${suite} needs Python and NEATROOTS_REQUIRE_SERVICES=1 forbids skipping (${why})`);
  process.stderr.write(`skipping ${suite}: ${why}\n`);
  return undefined;
}
