/**
 * The window-store port's contract, passed by MemoryWindowStore and RedisWindowStore alike
 * (run by contract/windows.integration.spec.ts). A helper (*.test.ts), not a suite, not built.
 */
import { WindowConflictError, type WindowStore } from '@neatroots/ports';
import { uniqueName } from '../testing/services';

export interface WindowsContractTarget {
  /**
   * A client of the store named `namespace`: two calls with the same namespace reach the same
   * windows (two replicas of the rule engine). The suite closes every client it opens.
   */
  open(namespace: string): Promise<WindowStore<TestWindow>>;
  /** Removes what the suite stored under these namespaces. */
  cleanup?(namespaces: string[]): Promise<void>;
}

/** Shaped like a RunWindow: nested objects, arrays, numbers, text. */
export interface TestWindow {
  v: 1;
  run_id: string;
  seen: Record<string, 1>;
  metrics: { spans: number; cost: number; first_ms?: number };
  checks: Record<string, { t: string; n: number; spans: string[] }>;
  note?: string;
}

function win(run_id: string, n = 1): TestWindow {
  return {
    v: 1,
    run_id,
    seen: { s1: 1, s2: 1 },
    metrics: { spans: n, cost: 0.125, first_ms: 1_735_689_600_123 },
    checks: { 'repeated-tool-call': { t: 'streak', n, spans: ['s1', 's2'] } },
    note: 'unicode: é ✓ 🙂, "quotes", \\ and \n',
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function windowsContract(name: string, target: WindowsContractTarget): void {
  describe(`WindowStore contract: ${name}`, () => {
    const namespaces: string[] = [];
    const clients: WindowStore<TestWindow>[] = [];
    const open = async (ns?: string) => {
      const n = ns ?? uniqueName('contract_windows');
      if (!namespaces.includes(n)) namespaces.push(n);
      const c = await target.open(n);
      clients.push(c);
      return { store: c, ns: n };
    };

    afterAll(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await target.cleanup?.(namespaces);
    });

    it('loads what was saved, as JSON, and leaves missing keys out', async () => {
      const { store } = await open();
      // the rule engine's keys are project NUL run_id
      const a = 'proj\u0000run-a';
      const b = 'proj\u0000run-b';
      await store.save([{ key: a, window: win('run-a', 3) }, { key: b, window: win('run-b', 4) }]);
      const got = await store.load([a, 'proj\u0000missing', b, a]);
      expect([...got.keys()].sort()).toEqual([a, b].sort());
      expect(got.get(a)).toEqual(win('run-a', 3));
      expect(got.get(b)).toEqual(win('run-b', 4));
      expect((await store.load([])).size).toBe(0);
    });

    it('replaces a window on save, and another client of the store sees it', async () => {
      const { store, ns } = await open();
      await store.save([{ key: 'r', window: win('r', 1) }]);
      await store.save([{ key: 'r', window: win('r', 2) }]);
      const { store: other } = await open(ns);
      expect((await other.load(['r'])).get('r')?.metrics.spans).toBe(2);
    });

    it('expires a window ttlMs after its last save, and keeps one saved without ttl', async () => {
      // Timed from the clock around each call, not by summed sleeps, so a slow call on a loaded
      // machine widens no window: each check runs at least ttl after the save it expects expired,
      // and "renewed" is asserted present only while its renewal is certainly younger than ttl.
      const ttl = 2000;
      const { store } = await open();
      await store.save([
        { key: 'short', window: win('short'), ttlMs: ttl },
        { key: 'renewed', window: win('renewed'), ttlMs: ttl },
        { key: 'kept', window: win('kept'), ttlMs: ttl },
      ]);
      const firstSaved = Date.now();
      expect((await store.load(['short', 'renewed', 'kept'])).size).toBe(3);
      await sleep(1000);
      // saving again starts the ttl again; saving without one removes it
      const renewing = Date.now();
      await store.save([{ key: 'renewed', window: win('renewed', 2), ttlMs: ttl }, { key: 'kept', window: win('kept', 2) }]);
      const renewed = Date.now();
      await sleep(Math.max(0, firstSaved + ttl + 100 - Date.now()));
      const middle = [...(await store.load(['short', 'renewed', 'kept'])).keys()].sort();
      if (Date.now() - renewing < ttl) expect(middle).toEqual(['kept', 'renewed']);
      else expect(middle).toEqual(expect.arrayContaining(['kept'])); // this machine stalled past the renewal's ttl
      expect(middle).not.toContain('short');
      await sleep(Math.max(0, renewed + ttl + 100 - Date.now()));
      expect([...(await store.load(['short', 'renewed', 'kept'])).keys()]).toEqual(['kept']);
    });

    it('deletes windows and their wake-ups', async () => {
      const { store } = await open();
      await store.save([{ key: 'x', window: win('x') }, { key: 'y', window: win('y') }]);
      await store.wakeAt([{ key: 'x', atMs: 100 }, { key: 'y', atMs: 100 }]);
      await store.delete(['x', 'never-saved']);
      expect([...(await store.load(['x', 'y'])).keys()]).toEqual(['y']);
      expect(await store.takeDue(1000, 10)).toEqual(['y']);
    });

    it('keeps the earliest wake time of a key', async () => {
      const { store } = await open();
      await store.wakeAt([{ key: 'k', atMs: 500 }]);
      await store.wakeAt([{ key: 'k', atMs: 300 }, { key: 'k', atMs: 400 }]);
      await store.wakeAt([{ key: 'k', atMs: 900 }]);
      expect(await store.takeDue(299, 10)).toEqual([]);
      expect(await store.takeDue(300, 10)).toEqual(['k']);
      expect(await store.takeDue(10_000, 10)).toEqual([]);
      // taken keys can be scheduled again
      await store.wakeAt([{ key: 'k', atMs: 700 }]);
      expect(await store.takeDue(700, 10)).toEqual(['k']);
    });

    it('takes only due keys, each once, at most limit at a time', async () => {
      const { store } = await open();
      await store.wakeAt([100, 200, 300, 400, 500].map((atMs, i) => ({ key: `k${i}`, atMs })));
      expect((await store.takeDue(300, 10)).sort()).toEqual(['k0', 'k1', 'k2']);
      expect(await store.takeDue(300, 10)).toEqual([]);
      const one = await store.takeDue(1000, 1);
      expect(one).toHaveLength(1);
      const rest = await store.takeDue(1000, 10);
      expect([...one, ...rest].sort()).toEqual(['k3', 'k4']);
    });

    it('never gives one key to two clients taking due keys at once', async () => {
      const { store: a, ns } = await open();
      const { store: b } = await open(ns);
      const keys = Array.from({ length: 500 }, (_, i) => `run-${i}`);
      await a.wakeAt(keys.map((key, i) => ({ key, atMs: 1000 + i })));
      const taken: string[][] = [];
      const drain = async (s: WindowStore<TestWindow>) => {
        for (;;) {
          const got = await s.takeDue(5000, 7);
          if (!got.length) return;
          taken.push(got);
          if (taken.length > 1000) throw new Error('takeDue keeps returning keys');
        }
      };
      await Promise.all([drain(a), drain(b), drain(a), drain(b)]);
      const all = taken.flat();
      expect(all).toHaveLength(keys.length);
      expect(new Set(all).size).toBe(keys.length);
    });

    it('saves with compare-and-set: a stale writer is refused and writes nothing', async () => {
      const { store: a, ns } = await open();
      const { store: b } = await open(ns);
      await a.save([{ key: 'r', window: win('r', 1), expectRev: 0 }]);
      // both replicas loaded revision 1; b saves first, a's save must fail whole
      await b.save([{ key: 'r', window: win('r', 2), expectRev: 1 }]);
      await expect(a.save([{ key: 'other', window: win('other'), expectRev: 0 }, { key: 'r', window: win('r', 99), expectRev: 1 }])).rejects.toBeInstanceOf(
        WindowConflictError,
      );
      const got = await a.load(['r', 'other']);
      expect(got.get('r')?.metrics.spans).toBe(2);
      expect(got.has('other')).toBe(false);
      await a.save([{ key: 'r', window: win('r', 3), expectRev: 2 }]);
      expect((await b.load(['r'])).get('r')?.metrics.spans).toBe(3);
      // a new key, or one deleted, is at revision 0
      await a.delete(['r']);
      await a.save([{ key: 'r', window: win('r', 4), expectRev: 0 }]);
    });

    it('sets wakes exactly, clears them, and leases taken keys until settled', async () => {
      const { store } = await open();
      await store.wakeAt([{ key: 'k', atMs: 100 }]);
      await store.setWakes([{ key: 'k', atMs: 800 }]);
      expect(await store.takeDue(500, 10)).toEqual([]);
      expect(await store.takeDue(800, 10, 1000)).toEqual(['k']);
      // leased: not due again until 800 + 1000
      expect(await store.takeDue(1799, 10, 1000)).toEqual([]);
      expect(await store.takeDue(1800, 10, 1000)).toEqual(['k']);
      // the step that took it saved and had nothing left to wait for
      await store.setWakes([{ key: 'k', atMs: null }]);
      expect(await store.takeDue(100_000, 10)).toEqual([]);
    });
  });
}
