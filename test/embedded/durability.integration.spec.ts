import { checkOf, compare, expected, fleet, send } from '../distributed/fleet';
import { EmbeddedProc, Load, waitUntil } from './support';

/**
 * Acknowledged means durable, on the embedded default: `neatroots start` is killed (SIGKILL)
 * or stopped (SIGTERM, with a short drain) while a steady load flows; it is started again on
 * the same data folder and stopped cleanly; then every span whose export was acknowledged
 * must be in storage; and the findings of runs in progress at the crash are those of an
 * uninterrupted run (the run windows are journaled). Needs the built CLI (npm run build); no
 * external service.
 */
const missing = (acked: Set<string>, stored: Set<string>) => [...acked].filter((k) => !stored.has(k));

describe('embedded: every acknowledged span is stored after a crash or a stop', () => {
  it('SIGKILL under load, then a restart: nothing acknowledged is missing', async () => {
    const app = new EmbeddedProc('kill', 'key-kill', { NEATROOTS_DRAIN_MS: '120000' });
    try {
      await app.start();
      const load = new Load(app, { inflight: 8, perExport: 200, maxSpans: 200_000 }).start();
      await waitUntil(() => load.acked.size >= 30_000, 90_000, () => `${load.acked.size} acknowledged`);
      const killed = await app.stop('SIGKILL');
      await load.stop();
      expect(killed.signal).toBe('SIGKILL');
      const acked = load.acked;

      await app.start(); // the log is read back; what was not processed is processed now
      const stopped = await app.stop('SIGTERM');
      expect(stopped.code).toBe(0);
      const stored = await app.storedSpans();
      const lost = missing(acked, stored);
      expect({ acknowledged: acked.size, missing: lost.length, firstMissing: lost.slice(0, 5) }).toEqual({ acknowledged: acked.size, missing: 0, firstMissing: [] });
    } finally {
      app.remove();
    }
  }, 300_000);

  it('SIGTERM under load: drains for NEATROOTS_DRAIN_MS, says how much stays durable, and the next start stores it', async () => {
    const app = new EmbeddedProc('term', 'key-term');
    try {
      await app.start({ NEATROOTS_DRAIN_MS: '300' });
      const load = new Load(app, { inflight: 16, perExport: 500, maxSpans: 400_000 }).start();
      await waitUntil(() => load.acked.size >= 60_000, 90_000, () => `${load.acked.size} acknowledged`);
      const stopped = await app.stop('SIGTERM');
      await load.stop();
      expect(stopped.code).toBe(0);
      const said = app.output.join('');
      const left = /(\d+) accepted records not processed yet stay durable in (\S+)/.exec(said);
      // Where the pipeline was behind at the stop (storage is slower than ingest on a quiet
      // machine), the stop says how much it left, and where, and the next start says it takes
      // it up. On a loaded machine the load itself may be slower than the pipeline, which then
      // catches up while ingest stops: nothing is left to say. That the line is said whenever
      // something is left is shown without a race in libs/platform/src/bus/embedded.spec.ts.
      if (left) expect(Number(left[1])).toBeGreaterThan(0);
      const acked = load.acked;

      await app.start({ NEATROOTS_DRAIN_MS: '120000' });
      if (left) expect(app.output.join('')).toMatch(/records accepted before the last stop were not processed yet; processing them now/);
      expect((await app.stop('SIGTERM')).code).toBe(0);
      const stored = await app.storedSpans();
      const lost = missing(acked, stored);
      expect({ acknowledged: acked.size, missing: lost.length, firstMissing: lost.slice(0, 5) }).toEqual({ acknowledged: acked.size, missing: 0, firstMissing: [] });
    } finally {
      app.remove();
    }
  }, 300_000);

  it('SIGKILL mid-stream, then a restart: the findings of runs that straddle the crash are those of neatroots replay', async () => {
    // NEATROOTS_WINDOWS=memory (the windows lost with the process) makes this test fail.
    const app = new EmbeddedProc('windows', 'key-windows', { NEATROOTS_DRAIN_MS: '120000', ...(process.env.NEATROOTS_WINDOWS ? { NEATROOTS_WINDOWS: process.env.NEATROOTS_WINDOWS } : {}) });
    try {
      await app.start();
      // 160 runs of 25 tool calls, 40 open at a time: loops and error streaks cut by the crash
      const items = fleet(app.project, 160, 25);
      const want = await expected(items, app.home);
      expect(want.size).toBeGreaterThan(50);
      // three crashes: about 40 runs in progress at each
      const crashes = [0.3, 0.5, 0.7];
      await send(app.ports.grpc, app.key, items, async (frac) => {
        if (!crashes.length || frac < crashes[0]) return;
        crashes.shift();
        expect((await app.stop('SIGKILL')).signal).toBe('SIGKILL');
        await app.start();
      });
      expect((await app.stop('SIGTERM')).code).toBe(0);
      const got = await app.storedFindings();
      const diff = compare(got, want);
      if (diff.missing.length || diff.extra.length) {
        const extra = await app.describeFindings(diff.extra.slice(0, 20));
        console.error(`missing ${diff.missing.slice(0, 20).map((k) => checkOf.get(k)).join(' ')}\nextra ${extra.join(' ')}\n${app.output.join('').slice(-3000)}`);
      }
      expect({ ...diff, stored: got.size }).toEqual({ missing: [], extra: [], wrongState: [], stored: want.size });
    } finally {
      app.remove();
    }
  }, 300_000);
});
