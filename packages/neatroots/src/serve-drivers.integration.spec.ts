import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPostgres, requireService, uniqueName } from '@neatroots/platform';

/**
 * `neatroots serve --target X` as an operator runs it: a driver its services need and the
 * configuration does not name stops it at start-up, before it touches anything (Postgres is not
 * migrated), with exit 2 and one line naming the variable and the service, not a stack trace.
 */
const SUITE = 'serve: a driver not configured';
const kafka = requireService('kafka', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && pg ? describe : describe.skip;
const bin = path.resolve(__dirname, '..', 'bin', 'neatroots.js');

function serve(target: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  // Only what the test gives: none of the runner's NEATROOTS_* (its NEATROOTS_REDIS_URL above all).
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('NEATROOTS_')));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, 'serve', '--target', target], { env: { ...base, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

maybe(SUITE, () => {
  it('--target review without NEATROOTS_REDIS_URL (its jobs are on Redis) exits 2 naming it and review, before migrating Postgres', async () => {
    const server = await openPostgres({ url: pg!, max: 1 });
    const name = uniqueName('serve_nodriver').toLowerCase();
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-serve-'));
    await server.query(`CREATE DATABASE ${name}`);
    try {
      const url = new URL(pg!);
      url.pathname = `/${name}`;
      const r = await serve('review', {
        NEATROOTS_HOME: home,
        NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
        NEATROOTS_PG_URL: url.toString(),
        NEATROOTS_ADMIN_PORT: '0',
        NEATROOTS_REVIEW_PORT: '0',
      });
      expect([r.code, r.stderr.trim()]).toEqual([2, 'neatroots serve: NEATROOTS_REDIS_URL is required for --target review (by review)']);
      const db = await openPostgres({ url: url.toString(), max: 1 });
      try {
        const tables = await db.query<{ n: string }>(`SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'public'`);
        expect(Number(tables.rows[0].n)).toBe(0);
      } finally {
        await db.close();
      }
    } finally {
      await server.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await server.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);
});
