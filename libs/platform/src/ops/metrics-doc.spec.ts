import * as fs from 'node:fs';
import * as path from 'node:path';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { createMetrics } from './admin';

/**
 * docs/operations.md's Metrics table names every metric /metrics serves besides prom-client's
 * defaults, and nothing else: a metric added to createMetrics without a line there (or a line
 * left for one that went) fails here.
 */

const root = path.resolve(__dirname, '../../../..');

/** The rows of the table under "## Metrics": the metric of each, as written in its first cell. */
function documented(): string[] {
  const doc = fs.readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
  const section = doc.split(/^## Metrics$/m)[1]?.split(/^## /m)[0];
  if (!section) throw new Error('docs/operations.md has no "## Metrics" section');
  return [...section.matchAll(/^\| `(neatroots_[a-z0-9_]+)` \|/gm)].map((m) => m[1]);
}

async function registered(): Promise<string[]> {
  const defaults = new Registry();
  collectDefaultMetrics({ register: defaults, prefix: 'neatroots_' });
  const builtIn = new Set((await defaults.getMetricsAsJSON()).map((m) => m.name));
  const own = (await createMetrics('test').registry.getMetricsAsJSON()).map((m) => m.name);
  return own.filter((n) => !builtIn.has(n));
}

/** Source files (not specs) that import prom-client: only admin.ts may, so createMetrics holds them all. */
function promClientImporters(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.')) continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.tsx?$/.test(e.name) && !/\.(spec|test)\.tsx?$/.test(e.name) && /from 'prom-client'/.test(fs.readFileSync(p, 'utf8'))) {
        out.push(path.relative(root, p));
      }
    }
  };
  for (const top of ['libs', 'services', 'packages']) walk(path.join(root, top));
  return out;
}

describe('the metrics reference (docs/operations.md#metrics)', () => {
  it('names every metric the code registers, and only those', async () => {
    const own = await registered();
    expect(own.length).toBeGreaterThan(10);
    expect([...documented()].sort()).toEqual([...own].sort());
  });

  it('registers metrics in one place', () => {
    expect(promClientImporters()).toEqual(['libs/platform/src/ops/admin.ts']);
  });
});
