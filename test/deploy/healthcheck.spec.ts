/**
 * deploy/docker/healthcheck.js, the probe docker and docker compose run inside the container
 * (the slim image has no curl): against a real HTTP server standing in for the admin port.
 */
import { spawn } from 'node:child_process';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { repoRoot } from './support';

const script = path.join(repoRoot, 'deploy/docker/healthcheck.js');

function probe(port: number, args: string[] = [], extraEnv: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      env: { PATH: process.env.PATH ?? '', NEATROOTS_ADMIN_PORT: String(port), ...extraEnv },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('deploy/docker/healthcheck.js', () => {
  let server: http.Server;
  let port: number;
  const seen: string[] = [];
  let ready = true;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      if (req.url === '/never') return; // never answered: only the probe's own timeout ends it
      if (req.url === '/readyz' && !ready) {
        res.statusCode = 503;
        return void res.end('kafka: not connected');
      }
      res.statusCode = req.url === '/readyz' || req.url === '/healthz' ? 200 : 404;
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => {
    server.closeAllConnections();
    server.close(() => r());
  }));

  it('exits 0 when /readyz (the default) answers 2xx', async () => {
    seen.length = 0;
    ready = true;
    expect(await probe(port)).toEqual({ code: 0, stderr: '' });
    expect(seen).toEqual(['/readyz']);
  });

  it('probes the path it is given', async () => {
    seen.length = 0;
    expect((await probe(port, ['/healthz'])).code).toBe(0);
    expect(seen).toEqual(['/healthz']);
  });

  it('exits 1 and says why when the service is not ready', async () => {
    ready = false;
    const r = await probe(port);
    ready = true;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('answered 503: kafka: not connected');
  });

  it('exits 1 when nothing listens on the admin port', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const free = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const r = await probe(free);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ECONNREFUSED/);
  });

  it('gives up after its timeout instead of hanging the health check', async () => {
    // The server never answers /never: a probe without its timeout would hang until the test's
    // own limit. Whether the request reached the server before the 300 ms ran out depends on how
    // fast a loaded machine starts node, so the test only asks that the probe gave up and said why.
    const r = await probe(port, ['/never'], { NEATROOTS_HEALTHCHECK_TIMEOUT_MS: '300' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/\/never: The operation was aborted due to timeout/);
  }, 30_000);
});
