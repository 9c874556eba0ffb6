import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The layer rules of eslint.config.mjs, as `npm run lint` applies them. The code under test is
 * handed to eslint as text with the path it would have, so no file is ever written into a
 * library (nothing to leave behind); and Nx keeps its project graph in a fresh directory, as in
 * a clean clone (the boundary rule used to skip itself when no graph was cached).
 */
const root = join(__dirname, '..', '..');
const ADAPTER_PACKAGES = ['kafkajs', 'ioredis', 'pg', '@electric-sql/pglite', 'openai', 'bullmq'];

let graphDir: string;
beforeAll(() => {
  graphDir = mkdtempSync(join(tmpdir(), 'neatroots-nx-'));
});
afterAll(() => rmSync(graphDir, { recursive: true, force: true }));

interface Linted {
  /** eslint's exit code for this file alone: 1 when it has an error. */
  status: number;
  out: string;
}

/**
 * Lints code as if it were at each path, with the repo's eslint.config.mjs, in one eslint
 * process (loading the config builds the project graph, the slow part). Its output also carries
 * anything the config printed, such as Nx's "No cached ProjectGraph" warning.
 */
function lint(files: { path: string; code: string }[]): Linted[] {
  const script = `
    import { ESLint } from 'eslint';
    const files = JSON.parse(process.env.LINT_FILES);
    const eslint = new ESLint({ cwd: process.cwd() });
    const out = [];
    for (const f of files) {
      const [r] = await eslint.lintText(f.code, { filePath: f.path });
      out.push({ status: r.errorCount ? 1 : 0, out: r.messages.map((m) => m.ruleId + ': ' + m.message).join('\\n') });
    }
    process.stdout.write('\\n@@' + JSON.stringify(out));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, LINT_FILES: JSON.stringify(files), NX_WORKSPACE_DATA_DIRECTORY: graphDir, NX_DAEMON: 'false' },
    timeout: 120_000,
  });
  const at = r.stdout.lastIndexOf('\n@@');
  if (r.status !== 0 || at < 0) throw new Error(`eslint did not run: ${r.stdout}${r.stderr}`);
  const printed = r.stdout.slice(0, at) + r.stderr;
  return (JSON.parse(r.stdout.slice(at + 3)) as Linted[]).map((x) => ({ status: x.status, out: `${printed}${x.out}` }));
}

const one = (path: string, code: string): Linted => lint([{ path, code }])[0];

/** Workspace packages by their Nx tag, read from the package.json files the rule reads. */
function projectsTagged(tag: string): string[] {
  const out: string[] = [];
  for (const dir of ['libs', 'services', 'packages']) {
    for (const name of readdirSync(join(root, dir))) {
      try {
        const pkg = JSON.parse(readFileSync(join(root, dir, name, 'package.json'), 'utf8'));
        if (pkg.nx?.tags?.includes(tag)) out.push(`${dir}/${name}`);
      } catch {
        // not a package
      }
    }
  }
  return out;
}

const adapterImports = ADAPTER_PACKAGES.map((p, i) => `import * as a${i} from '${p}';`).join('\n') + `\nexport const all = [${ADAPTER_PACKAGES.map((_, i) => `a${i}`).join(', ')}];\n`;

describe('layer rules (npm run lint)', () => {
  it('runs from an empty Nx cache and fails an adapter import in a domain library', () => {
    expect(readdirSync(graphDir)).toEqual([]);
    const r = one('libs/checks/src/forbidden.ts', "import { Kafka } from 'kafkajs';\nexport const k = Kafka;\n");
    expect(r.out).not.toMatch(/No cached ProjectGraph/);
    expect(r.out).toMatch(/type:domain" is not allowed to import "kafkajs"/);
    expect(r.status).toBe(1);
  });

  it('bans every adapter package in every domain library, the new ones included', () => {
    const domain = projectsTagged('type:domain');
    expect(domain).toEqual(expect.arrayContaining(['libs/checks', 'libs/sop', 'libs/review', 'libs/messages', 'libs/spans']));
    const results = lint(domain.map((lib) => ({ path: `${lib}/src/forbidden.ts`, code: adapterImports })));
    results.forEach((r, i) => {
      for (const p of ADAPTER_PACKAGES) expect(`${domain[i]}: ${r.out}`).toContain(`is not allowed to import "${p}"`);
      expect(r.status).toBe(1);
    });
  });

  it('fails a domain library importing the adapters library, by name or by relative path', () => {
    const [byName, byPath] = lint([
      { path: 'libs/checks/src/forbidden.ts', code: "import { MemoryWindowStore } from '@neatroots/platform';\nexport const m = MemoryWindowStore;\n" },
      { path: 'libs/checks/src/forbidden.ts', code: "import { MemoryWindowStore } from '../../platform/src';\nexport const m = MemoryWindowStore;\n" },
    ]);
    expect(byName.out).toMatch(/type:domain" can only depend on libs tagged with "type:domain"/);
    expect(byName.status).toBe(1);
    expect(byPath.status).toBe(1);
  });

  it('keeps services away from adapter packages too: the app wires them in', () => {
    const r = one('services/ingest/src/forbidden.ts', "import { Kafka } from 'kafkajs';\nexport const k = Kafka;\n");
    expect(r.status).toBe(1);
    expect(r.out).toMatch(/type:service" is not allowed to import "kafkajs"/);
  });

  it('passes what the layers allow: a domain lib on a domain lib, the adapters lib on kafkajs', () => {
    const [domain, adapter] = lint([
      { path: 'libs/checks/src/allowed.ts', code: "import { itemRunId } from '@neatroots/spans';\nexport const f = itemRunId;\n" },
      { path: 'libs/platform/src/allowed.ts', code: "import { Kafka } from 'kafkajs';\nexport const k = Kafka;\n" },
    ]);
    expect(domain).toMatchObject({ status: 0 });
    expect(adapter).toMatchObject({ status: 0 });
  });
});
