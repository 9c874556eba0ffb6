import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { tarballManifest, writeOfflineLock } from './offline-install';

/**
 * The agent SDK and the CLI as a user gets them: `npm pack` tarballs (scripts/pack.js) installed
 * into empty folders outside this repository, then run. Third-party packages come from npm's
 * cache instead of the registry (see offline-install.ts), and re2's compiled addon from a
 * local folder standing in for its download mirror, so the test needs no network. Needs no
 * service either; it is in the integration tier because installing takes a while.
 */
const root = path.join(__dirname, '..', '..');

let tmp: string;
let cliDir: string;
let sdkDir: string;
let cliTarball: string;
let sdkTarball: string;

/** The environment of a user's shell: none of the npm variables of the `npm run` that started jest. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && k !== 'NODE_PATH' && k !== 'NODE_OPTIONS') env[k] = v;
  return { ...env, ...extra };
}

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): string {
  try {
    return execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
  }
}

/** sh without blocking: the two tarballs are packed and installed side by side. */
function shAsync(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, encoding: 'utf8', timeout: 180_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Packs a workspace package with scripts/pack.js and installs the tarball into `dir`, offline. */
async function packAndInstall(target: string, outDir: string, dir: string, env: NodeJS.ProcessEnv = userEnv()): Promise<string> {
  const tarball = (await shAsync(process.execPath, [path.join(root, 'scripts', 'pack.js'), target, outDir], root)).trim();
  fs.mkdirSync(dir, { recursive: true });
  const local = path.join(dir, path.basename(tarball));
  fs.copyFileSync(tarball, local);
  const registry = (await shAsync('npm', ['config', 'get', 'registry'], dir)).trim();
  writeOfflineLock({ repoLock: path.join(root, 'package-lock.json'), tarball: local, dir, registry, allowScripts: ['re2'] });
  await shAsync('npm', ['ci', '--offline', '--no-audit', '--no-fund'], dir, env);
  return tarball;
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-tarballs-'));
  // What is packed is the build: bring it up to date with the sources first.
  sh(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', 'packages/neatroots', 'packages/sdk'], root);
  sdkDir = path.join(tmp, 'agent');
  cliDir = path.join(tmp, 'cli');
  // re2 downloads its compiled addon on install; this folder stands in for the download site.
  const mirror = path.join(tmp, 're2-mirror');
  fs.mkdirSync(mirror);
  const addon = path.join(path.dirname(require.resolve('re2/package.json', { paths: [root] })), 'build', 'Release', 're2.node');
  fs.copyFileSync(addon, path.join(mirror, `${process.platform}-${process.arch}-${process.versions.modules}`));
  [sdkTarball, cliTarball] = await Promise.all([
    packAndInstall('packages/sdk', path.join(tmp, 'out-sdk'), sdkDir),
    packAndInstall('packages/neatroots', path.join(tmp, 'out-cli'), cliDir, userEnv({ RE2_DOWNLOAD_MIRROR: mirror, RE2_DOWNLOAD_SKIP_PATH: '1', RE2_DOWNLOAD_SKIP_VER: '1' })),
  ]);
}, 300_000);

afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Where `name` resolves from inside an installed folder. */
function resolvedFrom(dir: string, name: string, from?: string): string {
  const paths = from ? `{ paths: [require('path').dirname(require.resolve('${from}'))] }` : '';
  return sh(process.execPath, ['-p', `require.resolve('${name}'${paths ? `, ${paths}` : ''})`], dir).trim();
}

describe('the agent SDK tarball', () => {
  it('carries its workspace dependencies and resolves everything inside the install folder', () => {
    const manifest = tarballManifest(sdkTarball);
    // proto for the wire, spans for the one mapping of a span to it (the one ingest reads back)
    expect(manifest.bundleDependencies).toEqual(['@neatroots/proto', '@neatroots/spans']);
    expect(resolvedFrom(sdkDir, '@neatroots/sdk').startsWith(sdkDir)).toBe(true);
    for (const dep of ['proto', 'spans']) {
      expect(resolvedFrom(sdkDir, `@neatroots/${dep}`, '@neatroots/sdk')).toBe(
        path.join(sdkDir, 'node_modules', '@neatroots', 'sdk', 'node_modules', '@neatroots', dep, 'dist', 'index.js'),
      );
    }
    expect(resolvedFrom(sdkDir, '@grpc/grpc-js', '@neatroots/sdk').startsWith(sdkDir)).toBe(true);
  });
});

describe('the CLI tarball', () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    sh(process.execPath, [path.join(cliDir, 'node_modules', '.bin', 'neatroots'), ...args], cliDir, userEnv({ NEATROOTS_HOME: path.join(tmp, 'home'), ...env }));

  it('installs its command and prints its version', () => {
    expect(cli(['--version']).trim()).toBe(tarballManifest(cliTarball).version);
    expect(resolvedFrom(cliDir, '@neatroots/checks', 'neatroots').startsWith(path.join(cliDir, 'node_modules', 'neatroots', 'node_modules'))).toBe(true);
  });

  it('replays spans with the shipped library and lists the demo project\'s halt rule', () => {
    const spans = path.join(cliDir, 'loop.jsonl');
    const call = (id: string) => JSON.stringify({ run_id: 'r1', span_id: id, type: 'tool', tool: 'search', input: { q: 'same' } });
    fs.writeFileSync(spans, `${['a', 'b', 'c'].map(call).join('\n')}\n`);
    const summary = cli(['replay', '--summary', spans]).trim().split('\n').map((l) => JSON.parse(l));
    expect(summary).toContainEqual({ check_id: 'repeated-tool-call', run_id: 'r1', state: 'open', count: 3 });
    const list = JSON.parse(cli(['checks', 'list', '--json']));
    expect(list.checks.find((c: { id: string }) => c.id === 'refund-without-lookup')).toMatchObject({ action: 'halt', projects: ['demo'] });
    // A check file with a mistake: validated by the installed schema (and re2, a native addon).
    fs.writeFileSync(path.join(cliDir, 'bad.yaml'), "id: bad\nkind: rule\nrule: { type: match, pattern: '(a+)+$' }\n");
    expect(() => cli(['checks', 'validate', path.join(cliDir, 'bad.yaml')])).toThrow(/rule\.pattern/);
  });

  it('serves, and an agent written with the SDK tarball gets a note back from it', async () => {
    const key = 'tarball-test-key-0123456789';
    const server: ChildProcess = spawn(process.execPath, [path.join(cliDir, 'node_modules', '.bin', 'neatroots'), 'start', '--no-demo'], {
      cwd: cliDir,
      env: userEnv({
        NEATROOTS_HOME: path.join(tmp, 'home'),
        NEATROOTS_DATA_DIR: path.join(tmp, 'data'),
        NEATROOTS_API_KEYS: `shop=${key}`,
        NEATROOTS_OTLP_PORT: '0',
        NEATROOTS_OTLP_HTTP_PORT: '0',
        NEATROOTS_GRPC_PORT: '0',
        NEATROOTS_HTTP_PORT: '0',
        NEATROOTS_ADMIN_PORT: '0',
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    server.stdout!.on('data', (d) => (output += d));
    server.stderr!.on('data', (d) => (output += d));
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`neatroots start did not come up:\n${output}`)), 60_000);
        const check = () => {
          if (/Serving/.test(output)) {
            clearTimeout(t);
            resolve();
          }
        };
        server.stdout!.on('data', check);
        server.once('exit', (code) => {
          clearTimeout(t);
          reject(new Error(`neatroots start exited ${code}:\n${output}`));
        });
      });
      const grpcPort = /neatroots gRPC\s+\S+:(\d+)/.exec(output)?.[1];
      expect(grpcPort).toBeDefined();
      const agent = path.join(sdkDir, 'agent.js');
      fs.writeFileSync(
        agent,
        `const { NeatrootsClient } = require('@neatroots/sdk');
(async () => {
  const client = new NeatrootsClient({ address: process.argv[2], apiKey: process.argv[3], flushIntervalMs: 20 });
  const run = client.startRun({ run_id: 'tarball-' + Date.now() });
  const note = new Promise((resolve) => run.onNote(resolve));
  await run.whenSubscribed();
  for (let i = 0; i < 3; i++) run.span({ type: 'tool', tool: 'search', input: { q: 'the same' } });
  await run.flush();
  // unref: a pending timer must not keep the agent alive once the note is in.
  const got = await Promise.race([note, new Promise((r) => setTimeout(() => r(null), 30000).unref())]);
  console.log(JSON.stringify(got && { kind: got.kind, title: got.title }));
  await run.end();
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });
`,
      );
      const printed = sh(process.execPath, [agent, `127.0.0.1:${grpcPort}`, key], sdkDir).trim();
      expect(JSON.parse(printed.split('\n').pop()!)).toEqual({ kind: 'note', title: 'Same tool called repeatedly with identical arguments' });
    } finally {
      server.kill('SIGTERM');
      await new Promise((r) => (server.exitCode !== null ? r(null) : server.once('exit', r)));
    }
  });
});
