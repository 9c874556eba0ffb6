import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { layerBase, WindowConflictError, windowLayer, type WindowStore } from '@neatroots/ports';
import { windowsContract, type TestWindow } from '../contract/windows.contract.test';
import { MemoryWindowStore } from './memory';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-windows-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// The contract holds with a cap of two windows in memory: the rest go to the spill file and back.
const stores = new Map<string, MemoryWindowStore<TestWindow>>();
windowsContract('MemoryWindowStore, two windows in memory, the rest spilled', {
  open: async (ns) => {
    let store = stores.get(ns);
    if (!store) stores.set(ns, (store = new MemoryWindowStore<TestWindow>({ maxWindows: 2, spillFile: path.join(dir, `${ns}.spill`) })));
    const shared: WindowStore<TestWindow> = {
      load: (k) => store.load(k),
      save: (e) => store.save(e),
      delete: (k) => store.delete(k),
      wakeAt: (e) => store.wakeAt(e),
      setWakes: (e) => store.setWakes(e),
      takeDue: (n, l, lease) => store.takeDue(n, l, lease),
      close: async () => undefined,
    };
    return shared;
  },
});

interface W {
  run: string;
  n: number;
  list: string[];
}

describe('MemoryWindowStore cap', () => {
  it('keeps at most maxWindows in memory, the least recently used spilled and read back unchanged', async () => {
    const store = new MemoryWindowStore<W>({ maxWindows: 100, spillFile: path.join(dir, 'cap.spill') });
    for (let i = 0; i < 1000; i++) await store.save([{ key: `r${i}`, window: { run: `r${i}`, n: i, list: ['a', `é${i}`] }, ttlMs: 60_000 }]);
    expect(store.size).toBe(100);
    expect(store.spilled).toBe(900);
    // r0 went quiet long ago: it comes back as it was, and takes the place of the least recent one.
    const got = await store.load(['r0', 'r999']);
    expect(got.get('r0')).toEqual({ run: 'r0', n: 0, list: ['a', 'é0'] });
    expect(got.get('r999')).toEqual({ run: 'r999', n: 999, list: ['a', 'é999'] });
    expect(store.size).toBe(100);
    expect(store.counts).toEqual({ spilled: 901, restored: 1, dropped: 0 });
    await store.close();
  });

  it('spills the window used least recently: a load or a save is a use', async () => {
    const store = new MemoryWindowStore<W>({ maxWindows: 3 });
    const save = (k: string, n = 1) => store.save([{ key: k, window: { run: k, n, list: [] } }]);
    await save('a');
    await save('b');
    await save('c');
    await store.load(['a']); // b is now the least recent
    await save('d');
    expect([...(await store.load(['a', 'b', 'c', 'd'])).keys()]).toEqual(['a', 'c', 'd']);
    await save('c', 2); // a is now the least recent (the load above used a, c and d in that order)
    await save('e');
    expect([...(await store.load(['a', 'c', 'd', 'e'])).keys()]).toEqual(['c', 'd', 'e']);
    expect((await store.load(['c'])).get('c')?.n).toBe(2);
    expect(store.counts.dropped).toBe(2);
    // What a journal's snapshot reads: least recently used first.
    expect([...store.live()].map((e) => e.key)).toEqual(['d', 'e', 'c']);
    await store.close();
  });

  it('keeps at most maxResting windows of ended runs in memory: the longest at rest spilled, read back unchanged when their run speaks again', async () => {
    const store = new MemoryWindowStore<W>({ maxWindows: 50_000, maxResting: 10, spillFile: path.join(dir, 'rest.spill') });
    // 100 runs going on, 40 ended: of the ended, the 10 that ended last stay in memory.
    for (let i = 0; i < 100; i++) await store.save([{ key: `live${i}`, window: { run: `live${i}`, n: i, list: [] }, ttlMs: 60_000 }]);
    for (let i = 0; i < 40; i++) await store.save([{ key: `end${i}`, window: { run: `end${i}`, n: i, list: ['é'] }, ttlMs: 60_000, rest: true }]);
    expect(store.restingCount).toBe(10);
    expect(store.size).toBe(110);
    expect(store.spilled).toBe(30);
    // A late span of an ended run: its window comes back as it was saved, revision and all.
    const got = await store.load(['end0', 'live0']);
    expect(got.get('end0')).toEqual({ run: 'end0', n: 0, list: ['é'] });
    expect(got.get('live0')).toEqual({ run: 'live0', n: 0, list: [] });
    // In use again, it is not at rest until its next save says so: ended runs saved meanwhile
    // push the others out, not it.
    for (let i = 40; i < 60; i++) await store.save([{ key: `end${i}`, window: { run: `end${i}`, n: i, list: [] }, ttlMs: 60_000, rest: true }]);
    expect(store.peek('end0')).toBeDefined();
    expect(store.spilled).toBe(49); // 30 - end0 + 20 more ended: ends 30..39 and 40..49 out
    expect((await store.load(['end0'])).get('end0')?.n).toBe(0);
    expect(store.restingCount).toBe(10);
    // Saved at rest again, it is the newest at rest; saved not at rest (a run that came back), not at rest at all.
    await store.save([{ key: 'end0', window: { run: 'end0', n: 1, list: [] }, ttlMs: 60_000, expectRev: 1, rest: true }]);
    expect(store.restingCount).toBe(10);
    expect(store.spilled).toBe(50); // end50, the longest at rest, made room for it
    await store.save([{ key: 'end59', window: { run: 'end59', n: 2, list: [] }, ttlMs: 60_000, expectRev: 1 }]);
    expect(store.restingCount).toBe(9);
    // Every window there is, wherever it is: none lost.
    const all = await store.load([...Array.from({ length: 100 }, (_, i) => `live${i}`), ...Array.from({ length: 60 }, (_, i) => `end${i}`)]);
    expect(all.size).toBe(160);
    expect(all.get('end0')?.n).toBe(1);
    expect(all.get('end59')?.n).toBe(2);
    expect(store.counts.dropped).toBe(0);
    await store.close();
  });

  it('without a spill file keeps every window at rest (none is dropped for resting)', async () => {
    const store = new MemoryWindowStore<W>({ maxResting: 2 });
    for (let i = 0; i < 5; i++) await store.save([{ key: `e${i}`, window: { run: `e${i}`, n: i, list: [] }, rest: true }]);
    expect(store.size).toBe(5);
    expect(store.counts.dropped).toBe(0);
    await store.close();
  });

  it('keeps the revision of a spilled window, so a stale compare-and-set is still refused', async () => {
    const store = new MemoryWindowStore<W>({ maxWindows: 1, spillFile: path.join(dir, 'rev.spill') });
    await store.save([{ key: 'a', window: { run: 'a', n: 1, list: [] }, expectRev: 0 }]);
    await store.save([{ key: 'a', window: { run: 'a', n: 2, list: [] }, expectRev: 1 }]);
    await store.save([{ key: 'b', window: { run: 'b', n: 1, list: [] }, expectRev: 0 }]); // a is spilled
    expect(store.spilled).toBe(1);
    await expect(store.save([{ key: 'a', window: { run: 'a', n: 9, list: [] }, expectRev: 1 }])).rejects.toThrow(WindowConflictError);
    await store.save([{ key: 'a', window: { run: 'a', n: 3, list: [] }, expectRev: 2 }]);
    expect((await store.load(['a'])).get('a')?.n).toBe(3);
    await store.close();
  });

  it('expires spilled windows with their TTL', async () => {
    let now = 1_000;
    const store = new MemoryWindowStore<W>({ now: () => now, maxWindows: 1, spillFile: path.join(dir, 'ttl.spill') });
    await store.save([{ key: 'a', window: { run: 'a', n: 1, list: [] }, ttlMs: 500 }]);
    await store.save([{ key: 'b', window: { run: 'b', n: 1, list: [] }, ttlMs: 60_000 }]);
    now = 2_000;
    expect((await store.load(['a'])).has('a')).toBe(false);
    await store.close();
  });

  it('without a spill file, drops the least recently used past the cap and counts them', async () => {
    const store = new MemoryWindowStore<W>({ maxWindows: 10 });
    for (let i = 0; i < 25; i++) await store.save([{ key: `r${i}`, window: { run: `r${i}`, n: i, list: [] } }]);
    expect(store.size).toBe(10);
    expect(store.counts.dropped).toBe(15);
    expect((await store.load(['r0'])).size).toBe(0);
    await store.close();
  });
});

describe('MemoryWindowStore wakes of windows that are gone', () => {
  const win = (run: string): W => ({ run, n: 1, list: [] });

  it('drops the wake of a window it expires (in memory or spilled) or drops for want of room; a wake of a key never saved stays', async () => {
    let now = 1_000;
    const store = new MemoryWindowStore<W>({ now: () => now, maxWindows: 2, spillFile: path.join(dir, 'wakes.spill') });
    await store.save([{ key: 'spilled', window: win('spilled'), ttlMs: 1_000 }]);
    await store.save([{ key: 'short', window: win('short'), ttlMs: 1_000 }]);
    await store.save([{ key: 'long', window: win('long'), ttlMs: 600_000 }]);
    expect(store.spilled).toBe(1);
    await store.setWakes(['spilled', 'short', 'long', 'bare'].map((key) => ({ key, atMs: 1_250 })));
    // The sweep that comes with a save once the short windows expired takes their wakes too.
    now = 60_000;
    await store.save([{ key: 'long', window: win('long'), ttlMs: 600_000 }]);
    expect(store.wakeList().map((w) => w.key).sort()).toEqual(['bare', 'long']);
    expect(await store.takeDue(now, 10)).toEqual(['long', 'bare']);
    await store.close();

    const small = new MemoryWindowStore<W>({ maxWindows: 1 });
    await small.save([{ key: 'a', window: win('a') }]);
    await small.setWakes([{ key: 'a', atMs: 5 }]);
    await small.save([{ key: 'b', window: win('b') }]);
    expect(small.counts.dropped).toBe(1);
    expect(small.wakeOf('a')).toBeUndefined();
    await small.close();
  });

  it('clearOrphanWakes drops the wakes of the keys with no window now, and only those', async () => {
    let now = 1_000;
    const store = new MemoryWindowStore<W>({ now: () => now, maxWindows: 1, spillFile: path.join(dir, 'orphans.spill') });
    await store.save([{ key: 'spilled', window: win('spilled'), ttlMs: 600_000 }]);
    await store.save([{ key: 'live', window: win('live'), ttlMs: 600_000 }]);
    await store.save([{ key: 'expired', window: win('expired'), ttlMs: 1_000 }]);
    await store.setWakes(['spilled', 'live', 'expired', 'bare', 'other'].map((key) => ({ key, atMs: 5 })));
    now = 5_000;
    await store.clearOrphanWakes(['spilled', 'live', 'expired', 'bare']);
    expect(store.wakeList().map((w) => w.key).sort()).toEqual(['live', 'other', 'spilled']);
    await store.close();
  });
});

interface Seen {
  run: string;
  seen: Record<string, 1>;
}

describe('MemoryWindowStore: a window saved with a layer (windowLayer) over what it loaded', () => {
  const step = (w: Seen, ids: string[]): Seen => {
    const seen = windowLayer(w.seen);
    for (const id of ids) seen[id] = 1;
    return { ...w, seen };
  };

  it('stores the record with the layer\'s entries added; the loaded window is unchanged until the save', async () => {
    const store = new MemoryWindowStore<Seen>();
    await store.save([{ key: 'a', window: { run: 'a', seen: { s1: 1 } }, expectRev: 0 }]);
    const loaded = (await store.load(['a'])).get('a')!;
    const next = step(loaded, ['s2', 's3']);
    expect({ ...(await store.load(['a'])).get('a')!.seen }).toEqual({ s1: 1 });
    await store.save([{ key: 'a', window: next, expectRev: 1 }]);
    const got = (await store.load(['a'])).get('a')!;
    expect({ ...got.seen }).toEqual({ s1: 1, s2: 1, s3: 1 });
    expect(layerBase(got.seen)).toBeUndefined();
    await store.close();
  });

  it('leaves the stored window as it was when the save is refused (compare-and-set)', async () => {
    const store = new MemoryWindowStore<Seen>();
    await store.save([{ key: 'a', window: { run: 'a', seen: { s1: 1 } }, expectRev: 0 }]);
    const stale = step((await store.load(['a'])).get('a')!, ['s9']);
    await store.save([{ key: 'a', window: step((await store.load(['a'])).get('a')!, ['s2']), expectRev: 1 }]);
    await expect(store.save([{ key: 'a', window: stale, expectRev: 1 }])).rejects.toThrow(WindowConflictError);
    expect({ ...(await store.load(['a'])).get('a')!.seen }).toEqual({ s1: 1, s2: 1 });
    await store.close();
  });

  it('writes the whole record to the spill file when the window it lay over was spilled meanwhile', async () => {
    const store = new MemoryWindowStore<Seen>({ maxWindows: 1, spillFile: path.join(dir, 'layer.spill') });
    await store.save([{ key: 'a', window: { run: 'a', seen: { s1: 1 } }, expectRev: 0 }]);
    const next = step((await store.load(['a'])).get('a')!, ['s2']);
    await store.save([{ key: 'b', window: { run: 'b', seen: {} }, expectRev: 0 }]); // a is spilled
    await store.save([{ key: 'a', window: next, expectRev: 1 }]);
    await store.save([{ key: 'c', window: { run: 'c', seen: {} }, expectRev: 0 }]); // a is spilled again, as JSON
    expect({ ...(await store.load(['a'])).get('a')!.seen }).toEqual({ s1: 1, s2: 1 });
    await store.close();
  });
});
