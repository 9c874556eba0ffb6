import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { pythonOrSkip } from '@neatroots/platform';
import { KEY, repoRoot, startServer, type Server } from './server';

/**
 * The Python client (clients/python): installed with pip from the repo, its own tests run
 * against a running neatroots (a note received, a halt stopping the next tool call); its
 * generated code in step with proto/.
 */
const run = promisify(execFile);
const pkg = path.join(repoRoot, 'clients/python');
const python = pythonOrSkip('the Python client', ['grpc_tools', 'setuptools']);

(python ? describe : describe.skip)('the Python client', () => {
  let server: Server;
  /** One taking at most 64 KiB in one message, below the 4 MiB the client fills exports to. */
  let small: Server;
  let site: string;

  beforeAll(async () => {
    server = await startServer();
    small = await startServer({ NEATROOTS_MAX_MESSAGE_BYTES: String(64 * 1024) });
    site = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-py-'));
    // As a user installs it; its dependencies (grpcio, protobuf) are in the test venv already.
    await run(python!, ['-m', 'pip', 'install', '-q', '--no-deps', '--no-build-isolation', '--target', site, pkg], { timeout: 120_000 });
  }, 180_000);

  afterAll(async () => {
    await server?.close();
    await small?.close();
    if (site) fs.rmSync(site, { recursive: true, force: true });
  });

  it('passes its tests against a running server (a note received, a halt stopping the next tool call, an export over the size bound not sent again) and against a scripted local ingest (the export path and notes stream semantics)', async () => {
    const tests = path.join(pkg, 'tests');
    // Run from elsewhere with only the installed copy on the path, so the source tree is not what is tested.
    const res = await run(python!, ['-m', 'unittest', 'discover', '-v', '-s', tests, '-t', tests], {
      cwd: site,
      env: { ...process.env, PYTHONPATH: site, NEATROOTS_ADDRESS: server.address, NEATROOTS_SMALL_ADDRESS: small.address, NEATROOTS_API_KEY: KEY },
      timeout: 120_000,
    }).catch((e: { stdout: string; stderr: string }) => {
      throw new Error(`python tests failed:\n${e.stdout}\n${e.stderr}`);
    });
    expect(res.stderr).toMatch(/Ran 44 tests[\s\S]*OK/);
    const where = await run(python!, ['-c', 'import neatroots, sys; print(neatroots.__file__)'], { cwd: site, env: { ...process.env, PYTHONPATH: site } });
    expect(where.stdout.trim().startsWith(site)).toBe(true);
  }, 180_000);

  it('has generated code in step with proto/ (scripts/gen-python.sh)', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-pygen-'));
    try {
      await run(path.join(repoRoot, 'scripts/gen-python.sh'), [out], { env: { ...process.env, NEATROOTS_PYTHON: python! }, timeout: 120_000 });
      const gen = path.join(out, 'neatroots/v1');
      const files = fs.readdirSync(gen).sort();
      expect(files).toEqual(fs.readdirSync(path.join(pkg, 'neatroots/v1')).filter((f) => !f.startsWith('__pycache__')).sort());
      for (const f of files) {
        expect({ f, text: fs.readFileSync(path.join(pkg, 'neatroots/v1', f), 'utf8') }).toEqual({ f, text: fs.readFileSync(path.join(gen, f), 'utf8') });
      }
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  }, 180_000);
});
