import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Bus, Db, Platform, WindowStore } from '@neatroots/ports';
import type { ReviewQueries } from '@neatroots/store';
import { createLogger, createMetrics, loadConfig, startServices, type Services } from '@neatroots/platform';
import { UnavailableError } from './errors';
import { apiModule } from './module';

/**
 * The api writes its lines through the process's logger (NEATROOTS_LOG_FORMAT, NEATROOTS_LOG_LEVEL),
 * as every other service does: JSON lines with `service: api`, a failure that repeats logged once
 * and then at most every 30 s. Nest's console logger wrote coloured text of its own to standard
 * output instead, one line per 503, and each 500 with its stack.
 */
const platform: Platform = {
  kind: 'distributed',
  bus: () => ({}) as Bus,
  windows: async <W>() => ({}) as WindowStore<W>,
  db: async () => ({}) as Db,
  jobs: async () => {
    throw new Error('no jobs here');
  },
  ready: async () => true,
  drain: async () => undefined,
  close: async () => undefined,
};

/** What grpc-js says when review is away: the time in it differs at each try. */
const away = (i: number) =>
  new UnavailableError(`the review service cannot answer right now (UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:50053 (2026-12-05T03:00:${String(i % 60).padStart(2, '0')}.000Z)); retry shortly`);

describe("the api's log", () => {
  const lines: Record<string, unknown>[] = [];
  const written: string[] = [];
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'api-log-'));
  let services: Services;
  let base: string;
  let tries = 0;
  let stdout: jest.SpyInstance;
  let stderr: jest.SpyInstance;

  beforeAll(async () => {
    // Whatever else writes to the process's own streams (Nest's console logger did).
    const keep = (chunk: unknown) => void written.push(String(chunk));
    stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => (keep(chunk), true));
    stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => (keep(chunk), true));
    const log = createLogger({ level: 'debug', format: 'json', write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const queries = {
      listRuns: async () => {
        throw new Error('review service: the reply could not be read');
      },
    } as unknown as ReviewQueries;
    services = await startServices({
      platform,
      modules: [apiModule],
      config: loadConfig({ NEATROOTS_HOME: home, NEATROOTS_HTTP_PORT: '0' }),
      log,
      metrics: createMetrics('api'),
      links: {
        review: () => ({
          queries,
          resolveKey: async (key: string) => {
            if (key === 'down') throw away(tries++);
            return { project: 'shop', scope: 'api' };
          },
        }),
        question: () => ({ modelStats: async () => [] }),
      },
    });
    base = `http://127.0.0.1:${services.ports.http}`;
  }, 60_000);

  afterAll(async () => {
    await services?.close();
    stdout?.mockRestore();
    stderr?.mockRestore();
    fs.rmSync(home, { recursive: true, force: true });
  });

  const get = async (key: string) => {
    const res = await fetch(`${base}/v1/projects/shop/runs`, { headers: { 'x-api-key': key } });
    return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
  };

  it('review away: every request answered 503, and one warning line for them, through the service logger', async () => {
    for (let i = 0; i < 5; i++) expect(await get('down')).toEqual([503, 'unavailable']);
    const warned = lines.filter((l) => l.level === 'warn');
    expect(warned).toEqual([expect.objectContaining({ service: 'api', msg: expect.stringMatching(/^the review service cannot answer right now \(UNAVAILABLE: No connection established/) })]);
  });

  it('an unexpected fault: answered 500, logged once at error with the fault and where, not its message to the caller', async () => {
    for (let i = 0; i < 3; i++) expect(await get('good')).toEqual([500, 'internal']);
    const faults = lines.filter((l) => l.level === 'error');
    expect(faults).toEqual([
      expect.objectContaining({
        service: 'api',
        msg: 'api: unexpected error answering GET /v1/projects/shop/runs (500 internal)',
        err: expect.objectContaining({ message: 'review service: the reply could not be read' }),
      }),
    ]);
  });

  it("Nest's own lines come through the same logger (at debug), and nothing is written past it", () => {
    expect(lines.filter((l) => l.level === 'debug' && l.service === 'api' && l.context === 'NestApplication')).toEqual([
      expect.objectContaining({ msg: 'Nest application successfully started' }),
    ]);
    expect(written).toEqual([]);
  });
});
