import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { markAdded, markShifted, WindowConflictError, windowLayer, type WindowStore } from '@neatroots/ports';
import { windowsContract, type TestWindow } from '../contract/windows.contract.test';
import { encodeFrame } from '../bus/log/frame';
import { fillDisk } from '../full-disk.test';
import { JournalWindowStore, type JournalWindowStoreOptions } from './journal';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-journal-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// Another client of a namespace is the store opened again on the same folder, the previous one
// abandoned without close() (a crash): every client then uses the reopened store. Two windows
// in memory, the rest spilled: the cap holds with the journal too.
const current = new Map<string, JournalWindowStore<TestWindow>>();
windowsContract('JournalWindowStore, reopened from its files for every other client', {
  open: async (ns) => {
    current.set(ns, JournalWindowStore.open<TestWindow>({ dir: path.join(dir, 'contract'), name: ns, maxWindows: 2 }));
    const store = () => current.get(ns)!;
    const shared: WindowStore<TestWindow> = {
      load: (k) => store().load(k),
      save: (e) => store().save(e),
      delete: (k) => store().delete(k),
      wakeAt: (e) => store().wakeAt(e),
      setWakes: (e) => store().setWakes(e),
      takeDue: (n, l, lease) => store().takeDue(n, l, lease),
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
const w = (run: string, n: number): W => ({ run, n, list: ['a', `é${n}`, '"q"\n'] });

let seq = 0;
function opener(extra: Partial<JournalWindowStoreOptions> = {}) {
  const o: JournalWindowStoreOptions = { dir: path.join(dir, `t${seq++}`), name: 'runs', ...extra };
  return { open: () => JournalWindowStore.open<W>(o), journal: path.join(o.dir, 'runs.journal'), snapshot: path.join(o.dir, 'runs.snapshot') };
}

async function contents(s: JournalWindowStore<W>, keys: string[]) {
  return Object.fromEntries([...(await s.load(keys))].sort(([a], [b]) => a.localeCompare(b)));
}

describe('JournalWindowStore after a crash', () => {
  it('reopened without close(), has exactly the saved windows, revisions, expiries and wakes', async () => {
    let now = 1_000_000;
    const f = opener({ now: () => now });
    const a = f.open();
    await a.save([{ key: 'r1', window: w('r1', 1), ttlMs: 5_000, expectRev: 0 }, { key: 'r2', window: w('r2', 1) }]);
    await a.save([{ key: 'r1', window: w('r1', 2), ttlMs: 5_000, expectRev: 1 }]);
    await a.save([{ key: 'gone', window: w('gone', 1) }]);
    await a.delete(['gone']);
    await a.wakeAt([{ key: 'r1', atMs: 3_000 }]);
    await a.wakeAt([{ key: 'r1', atMs: 2_000 }]);
    await a.setWakes([{ key: 'r2', atMs: 4_000 }]);
    await a.wakeAt([{ key: 'r3', atMs: 1_500 }]);
    expect(await a.takeDue(1_500, 10, 60_000)).toEqual(['r3']); // leased to 61,500
    // changed in memory after the save: not what was saved, and not what comes back
    (await a.load(['r2'])).get('r2')!.n = 99;

    now += 1_000;
    const b = f.open(); // a is abandoned: no close, as after SIGKILL
    expect(await contents(b, ['r1', 'r2', 'gone'])).toEqual({ r1: w('r1', 2), r2: w('r2', 1) });
    // the revision came back: a stale writer is still refused, the next one goes on from 2
    await expect(b.save([{ key: 'r1', window: w('r1', 9), expectRev: 1 }])).rejects.toBeInstanceOf(WindowConflictError);
    await b.save([{ key: 'r2', window: w('r2', 2), expectRev: 1 }]);
    // the earliest wake kept, the lease kept
    expect(await b.takeDue(61_499, 10)).toEqual(['r1', 'r2']);
    expect(await b.takeDue(61_500, 10)).toEqual(['r3']);

    // the ttl runs from the save, not from the reopen: r1 expires at 1,005,000
    now = 1_004_999;
    expect(Object.keys(await contents(f.open(), ['r1', 'r2']))).toEqual(['r1', 'r2']);
    now = 1_005_000;
    const c = f.open();
    expect(Object.keys(await contents(c, ['r1', 'r2']))).toEqual(['r2']);
    await c.save([{ key: 'r1', window: w('r1', 1), expectRev: 0 }]); // expired: revision 0
    await c.close();
  });

  it('after a write the disk refused, writes nothing more: the next start reads every save that returned, and no edit of one that failed', async () => {
    const f = opener();
    const a = f.open();
    await a.save([{ key: 'r1', window: w('r1', 1) }]);
    await a.save([{ key: 'r1', window: w('r1', 2) }]); // journaled as an edit of the first
    const file = (a as unknown as { file: { fd: number } }).file;
    expect(a.failure()).toBeUndefined();
    const disk = fillDisk(file);
    await expect(a.save([{ key: 'r2', window: w('r2', 1) }])).rejects.toMatchObject({ code: 'ENOSPC' });
    // said to the platform, whose health checks fail with it
    expect(a.failure()).toMatch(/runs\.journal cannot be written \(ENOSPC.*until neatroots starts again/);
    disk.room();
    // r2's next save would be written as an edit of the record that failed; r1's after a sync that failed
    await expect(a.save([{ key: 'r2', window: w('r2', 2) }])).rejects.toThrow(/runs\.journal cannot be written \(ENOSPC.*nothing more is written to it until neatroots starts again/);
    await expect(a.save([{ key: 'r1', window: w('r1', 3) }])).rejects.toThrow(/cannot be written/);
    const b = f.open(); // the restart: the journal is a whole prefix
    expect(await contents(b, ['r1', 'r2'])).toEqual({ r1: w('r1', 2) });
    await b.close();
  });

  it('cuts a torn last record and keeps every change before it', async () => {
    const f = opener();
    const a = f.open();
    for (let i = 0; i < 20; i++) await a.save([{ key: `r${i % 5}`, window: w(`r${i % 5}`, i) }]);
    const whole = fs.statSync(f.journal).size;
    // the next save's record, cut short by the crash (it never returned)
    await a.save([{ key: 'r0', window: w('r0', 1000) }, { key: 'late', window: w('late', 1) }]);
    const full = fs.readFileSync(f.journal);
    fs.writeFileSync(f.journal, full.subarray(0, full.length - 7));

    const b = f.open();
    expect(b.stats.tornBytes).toBe(full.length - 7 - whole);
    expect(fs.statSync(f.journal).size).toBe(whole);
    expect(await contents(b, ['r0', 'r1', 'r2', 'r3', 'r4', 'late'])).toEqual({ r0: w('r0', 15), r1: w('r1', 16), r2: w('r2', 17), r3: w('r3', 18), r4: w('r4', 19) });
    // what is written after the cut is read back after the next crash
    await b.save([{ key: 'late', window: w('late', 2) }]);
    expect(await contents(f.open(), ['late', 'r4'])).toEqual({ late: w('late', 2), r4: w('r4', 19) });
  });

  it('refuses to start on a damaged snapshot, naming it', async () => {
    const f = opener();
    const a = f.open();
    await a.save([{ key: 'r', window: w('r', 1) }]);
    a.compact();
    const snap = fs.readFileSync(f.snapshot);
    snap[snap.length - 2] ^= 0xff;
    fs.writeFileSync(f.snapshot, snap);
    expect(() => f.open()).toThrow(/window snapshot .*runs\.snapshot is damaged at byte 0 \(checksum mismatch\)/);
  });

  it('compacts past its size bound into a snapshot, contents kept, even if cut before the journal was emptied', async () => {
    const f = opener({ compactBytes: 20_000, maxWindows: 50 });
    const a = f.open();
    const want: Record<string, W> = {};
    for (let i = 0; i < 2_000; i++) {
      const key = `r${i % 300}`;
      want[key] = w(key, i);
      await a.save([{ key, window: want[key], ttlMs: 3_600_000 }]);
      if (i % 7 === 0) await a.delete([`r${(i * 13) % 300}`]).then(() => delete want[`r${(i * 13) % 300}`]);
    }
    await a.setWakes([{ key: 'r1', atMs: 5 }]);
    await a.compacted();
    expect(a.stats.compactions).toBeGreaterThan(3);
    expect(a.stats.inMemory).toBe(50);
    expect(fs.statSync(f.journal).size).toBeLessThan(20_000 + 2_000);
    const keys = Array.from({ length: 300 }, (_, i) => `r${i}`);
    expect(await contents(f.open(), keys)).toEqual(want);

    // a crash between the snapshot's rename and the journal's truncation: the old journal is
    // replayed over the new snapshot, which already holds it
    const b = f.open();
    const old = fs.readFileSync(f.journal);
    b.compact();
    fs.writeFileSync(f.journal, old);
    const c = f.open();
    expect(await contents(c, keys)).toEqual(want);
    expect(await c.takeDue(10, 10)).toEqual(['r1']);

    // The same with edits relative to the save before (a ring shifted): those the snapshot holds are not applied again.
    const d = f.open();
    for (let i = 0; i < 30; i++) {
      const key = `r${i % 3}`;
      want[key] = { run: key, n: i, list: [...(want[key]?.list ?? []), `${i}`].slice(-4) };
      await d.save([{ key, window: want[key] }]);
    }
    expect(d.stats.edited).toBeGreaterThan(20);
    const older = fs.readFileSync(f.journal);
    d.compact();
    fs.writeFileSync(f.journal, older);
    expect(await contents(f.open(), keys)).toEqual(want);
  });

  it('a compaction that fails leaves every save durable and is tried again', async () => {
    const f = opener({ compactBytes: 2_000 });
    const a = f.open();
    fs.mkdirSync(`${f.snapshot}.tmp`); // the snapshot cannot be written
    for (let i = 0; i < 40; i++) await a.save([{ key: `r${i % 10}`, window: w(`r${i % 10}`, i) }]);
    await a.compacted();
    expect(a.stats.compactions).toBe(0);
    expect(a.stats.compactionError?.message).toMatch(/EISDIR/);
    fs.rmdirSync(`${f.snapshot}.tmp`);
    // Both journals (the one begun for the compaction holds the later saves) are read back.
    expect(fs.existsSync(`${f.journal}.next`)).toBe(true);
    expect(await contents(f.open(), ['r3', 'r9'])).toEqual({ r3: w('r3', 33), r9: w('r9', 39) });
    await a.save([{ key: 'r0', window: w('r0', 100) }]);
    await a.compacted();
    expect(a.stats).toMatchObject({ compactions: 1, compactionError: undefined });
    const keys = Array.from({ length: 10 }, (_, i) => `r${i}`);
    const want = Object.fromEntries(keys.map((k, i) => [k, w(k, i === 0 ? 100 : 30 + i)]));
    expect(await contents(f.open(), keys)).toEqual(want);
  });

  it('compacts beside the saves: a crash at any moment of it leaves each window as last saved or later, none lost', async () => {
    const f = opener({ compactBytes: 200_000 });
    const a = f.open();
    const keys = Array.from({ length: 2_000 }, (_, i) => `r${i}`);
    // Saved values of each key, in order, and how many of them had returned (were durable).
    const saved = new Map<string, number[]>();
    const durable = new Map<string, number>();
    // Each window's list is its last four saves: a ring, journaled as a shift and an item (an
    // edit relative to the save before, which a replay must not apply twice).
    const ring = (key: string, history: number[]): W => ({ run: key, n: history.at(-1)!, list: history.slice(-4).map(String) });
    const save = async (key: string, n: number) => {
      saved.set(key, [...(saved.get(key) ?? []), n]);
      const i = saved.get(key)!.length;
      await a.save([{ key, window: ring(key, saved.get(key)!) }]);
      durable.set(key, Math.max(durable.get(key) ?? 0, i));
    };
    const crashes: { dir: string; durable: Map<string, number> }[] = [];
    const crash = () => {
      const to = `${path.dirname(f.journal)}-crash${crashes.length}`;
      crashes.push({ dir: to, durable: new Map(durable) });
      // The copy is not one instant: a rename of the compaction's snapshot on the thread pool can
      // land between the listing and the copy of a file. Such a copy is not what a crash leaves;
      // it is taken again.
      for (let attempt = 0; ; attempt++) {
        try {
          fs.cpSync(path.dirname(f.journal), to, { recursive: true });
          break;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || attempt > 20) throw e;
          fs.rmSync(to, { recursive: true, force: true });
        }
      }
    };
    let n = 0;
    for (const k of keys) await save(k, n++);
    // Saves keep coming while compactions write their snapshots; the folder is copied as it is
    // on disk now and then (what a crash would leave).
    for (let round = 0; round < 6; round++) {
      await Promise.all(keys.filter((_, i) => i % 3 === round % 3).map((k) => save(k, n++)));
      crash();
      await new Promise((r) => setImmediate(r));
      crash();
    }
    await a.compacted();
    expect(a.stats.compactions).toBeGreaterThan(0);
    crash();
    // Some copies were taken while a snapshot was being written (both journals on disk).
    expect(crashes.filter((c) => fs.existsSync(path.join(c.dir, 'runs.journal.next'))).length).toBeGreaterThan(0);
    for (const c of crashes) {
      const b = JournalWindowStore.open<W>({ dir: c.dir, name: 'runs' });
      const got = await b.load(keys);
      for (const k of keys) {
        const history = saved.get(k)!;
        const at = history.indexOf(got.get(k)?.n ?? -1) + 1;
        // At or after the last save that had returned, never before it.
        if (at < (c.durable.get(k) ?? 0)) throw new Error(`${c.dir}: ${k} came back as save ${at} of ${history.length}, ${c.durable.get(k)} had returned`);
        // And exactly as that save left it.
        if (at) expect(got.get(k)).toEqual(ring(k, history.slice(0, at)));
      }
      await b.close();
    }
    // Everything saved, reopened at the end.
    const last = await f.open().load(keys);
    expect(keys.filter((k) => last.get(k)?.n !== saved.get(k)!.at(-1))).toEqual([]);
  });

  it('syncs saves made together once, each returning only after its record is on disk', async () => {
    const f = opener();
    const a = f.open();
    await Promise.all(Array.from({ length: 50 }, (_, i) => a.save([{ key: `r${i}`, window: w(`r${i}`, i) }])));
    expect(a.stats.syncs).toBeLessThanOrEqual(2);
    const keys = Array.from({ length: 50 }, (_, i) => `r${i}`);
    expect(Object.keys(await contents(f.open(), keys))).toHaveLength(50);
  });

  it('journals a save as what it changed, and reads a chain of such records back exactly, up to a torn last one', async () => {
    interface Run {
      ring: { id: string; text: string }[];
      seen: Record<string, 1>;
      checks: Record<string, { n: number; open?: { spans: string[] } }>;
    }
    const o = { dir: path.join(dir, `t${seq++}`), name: 'runs' };
    const a = JournalWindowStore.open<Run>(o);
    const run: Run = { ring: [], seen: {}, checks: {} };
    const versions: Run[] = [];
    for (let i = 0; i < 200; i++) {
      run.ring.push({ id: `s${i}`, text: `the output of span ${i} `.repeat(10) });
      if (run.ring.length > 40) run.ring.splice(0, run.ring.length - 40);
      run.seen[`s${i}`] = 1;
      // a check's state changes, opens a finding and, every 7 spans, closes it (a key removed)
      const c = (run.checks[`c${i % 5}`] ??= { n: 0 });
      c.n++;
      if (i % 7 === 0) delete c.open;
      else (c.open ??= { spans: [] }).spans = [...c.open.spans, `s${i}`].slice(-3);
      // a span id may be any string
      if (i === 100) run.seen['__proto__'] = 1;
      versions.push(JSON.parse(JSON.stringify(run)) as Run);
      // the store keeps the object it was given: each save hands over a copy, as the engine does
      await a.save([{ key: 'run', window: JSON.parse(JSON.stringify(run)) as Run, ttlMs: 3_600_000 }]);
    }
    // one whole record, the rest edits: a small part of the whole windows' size
    expect(a.stats).toMatchObject({ whole: 1, edited: 199 });
    const whole = versions.reduce((n, v) => n + JSON.stringify(v).length, 0);
    expect(fs.statSync(path.join(o.dir, 'runs.journal')).size).toBeLessThan(whole / 10);
    expect((await JournalWindowStore.open<Run>(o).load(['run'])).get('run')).toEqual(versions[199]);

    // A crash in the middle of the chain: the last record torn, the window is as the save before left it.
    const full = fs.readFileSync(path.join(o.dir, 'runs.journal'));
    const crashed = { dir: `${o.dir}-crash`, name: 'runs' };
    fs.mkdirSync(crashed.dir);
    fs.writeFileSync(path.join(crashed.dir, 'runs.journal'), full.subarray(0, full.length - 5));
    const b = JournalWindowStore.open<Run>(crashed);
    expect(b.stats.tornBytes).toBeGreaterThan(0);
    expect((await b.load(['run'])).get('run')).toEqual(versions[198]);
    // the chain goes on from there (whole first, then edits), and reads back after the next crash
    const next = { ...versions[198], seen: { ...versions[198].seen, late: 1 as const } };
    await b.save([{ key: 'run', window: JSON.parse(JSON.stringify(next)) as Run }]);
    next.checks.c0.n = 1000;
    await b.save([{ key: 'run', window: JSON.parse(JSON.stringify(next)) as Run }]);
    expect((await JournalWindowStore.open<Run>(crashed).load(['run'])).get('run')).toEqual(next);
  });

  it('opens a journal and snapshot written before edits existed (whole windows only): an upgrade keeps its windows', async () => {
    const o = { dir: path.join(dir, `t${seq++}`), name: 'runs' };
    fs.mkdirSync(o.dir);
    // The frames the store wrote before: a change per frame, windows whole, no sequence numbers in the snapshot.
    let offset = 0;
    const frames = (...changes: object[]) => Buffer.concat(changes.map((c) => encodeFrame('windows', 0, offset++, '', Buffer.from(JSON.stringify(c)))));
    fs.writeFileSync(path.join(o.dir, 'runs.snapshot'), frames({ put: [{ k: 'r1', w: w('r1', 1), x: null, r: 3 }, { k: 'r2', w: w('r2', 1), x: null, r: 1 }] }, { wake: [{ k: 'r2', at: 50 }] }));
    fs.writeFileSync(path.join(o.dir, 'runs.journal'), frames({ put: [{ k: 'r1', w: w('r1', 2), x: null, r: 4 }] }, { del: ['r2'] }, { put: [{ k: 'r3', w: w('r3', 7), x: null, r: 1 }] }, { wake: [{ k: 'r3', at: 60 }] }));
    const a = JournalWindowStore.open<W>(o);
    expect(await contents(a, ['r1', 'r2', 'r3'])).toEqual({ r1: w('r1', 2), r3: w('r3', 7) });
    expect(await a.takeDue(100, 10)).toEqual(['r3']);
    // saved on: the revision goes on, the next saves are edits, all read back
    await expect(a.save([{ key: 'r1', window: w('r1', 9), expectRev: 3 }])).rejects.toBeInstanceOf(WindowConflictError);
    await a.save([{ key: 'r1', window: w('r1', 5), expectRev: 4 }]);
    await a.save([{ key: 'r1', window: w('r1', 6), expectRev: 5 }]);
    expect(a.stats).toMatchObject({ whole: 1, edited: 1 });
    expect(await contents(JournalWindowStore.open<W>(o), ['r1', 'r2', 'r3'])).toEqual({ r1: w('r1', 6), r3: w('r3', 7) });
  });

  it('journals the entries of a field a step layered over the stored one (loadsStored), and reads them back exactly', async () => {
    interface Run {
      n: number;
      seen: Record<string, 1>;
      checks: Record<string, { count: number; spans?: string[] } | undefined>;
    }
    const o = { dir: path.join(dir, `t${seq++}`), name: 'runs' };
    const a = JournalWindowStore.open<Run>(o);
    await a.save([{ key: 'run', window: { n: 0, seen: { s0: 1 }, checks: { c1: { count: 1, spans: ['s0'] }, c2: { count: 5 } } } }]);
    const expected: Run = { n: 0, seen: { s0: 1 }, checks: { c1: { count: 1, spans: ['s0'] }, c2: { count: 5 } } };
    for (let i = 1; i <= 300; i++) {
      // as the rule engine steps: the stored window loaded, a copy with layers over its records
      const stored = (await a.load(['run'])).get('run')!;
      const step: Run = { ...stored, n: i, seen: windowLayer(stored.seen), checks: windowLayer(stored.checks) };
      step.seen[`s${i}`] = 1;
      const c1 = { ...stored.checks.c1!, count: i + 1, spans: [...stored.checks.c1!.spans!, `s${i}`].slice(-3) };
      step.checks.c1 = c1;
      expected.n = i;
      expected.seen[`s${i}`] = 1;
      expected.checks.c1 = JSON.parse(JSON.stringify(c1)) as Run['checks'][string];
      if (i === 150) {
        step.checks.c2 = undefined; // a state removed over the stored one
        delete expected.checks.c2;
      }
      await a.save([{ key: 'run', window: step }]);
    }
    expect(a.stats).toMatchObject({ whole: 1, edited: 300 });
    // each record holds the step's entries, not the ids seen before it (300 ids of ~4 bytes: a whole window is over 2 kB)
    expect(fs.statSync(path.join(o.dir, 'runs.journal')).size / 300).toBeLessThan(400);
    expect(JSON.parse(JSON.stringify((await a.load(['run'])).get('run')))).toEqual(expected);
    expect((await JournalWindowStore.open<Run>(o).load(['run'])).get('run')).toEqual(expected);
  });

  it('journals the keys a caller added in place and names (markAdded), and reads them back exactly', async () => {
    interface Run {
      n: number;
      seen: Record<string, 1>;
      checks: Record<string, { count: number }>;
    }
    const o = { dir: path.join(dir, `t${seq++}`), name: 'runs' };
    const a = JournalWindowStore.open<Run>(o);
    await a.save([{ key: 'run', window: { n: 0, seen: { s0: 1 }, checks: { c1: { count: 0 } } }, expectRev: 0 }]);
    for (let i = 1; i <= 300; i++) {
      // as the rule engine steps over a store that hands out what it holds: the window changed in
      // place, two span ids a step (one named `__proto__` once: an id like any other), saved as a
      // new top-level object naming the ids it added
      const stored = (await a.load(['run'])).get('run')!;
      const ids = i === 77 ? ['__proto__', `t${i}`] : [`s${i}`, `t${i}`];
      for (const id of ids) Object.defineProperty(stored.seen, id, { value: 1, writable: true, enumerable: true, configurable: true });
      stored.checks.c1.count = i;
      await a.save([{ key: 'run', window: markAdded({ ...stored, n: i }, { seen: ids }), expectRev: i }]);
    }
    expect(a.stats).toMatchObject({ whole: 1, edited: 300 });
    // each record holds the step's ids, not the 600 seen before it
    expect(fs.statSync(path.join(o.dir, 'runs.journal')).size / 300).toBeLessThan(300);
    const back = (await JournalWindowStore.open<Run>(o).load(['run'])).get('run')!;
    expect(Object.keys(back.seen)).toHaveLength(601);
    expect(Object.prototype.hasOwnProperty.call(back.seen, '__proto__')).toBe(true);
    expect(back.seen.s300).toBe(1);
    expect(back).toMatchObject({ n: 300, checks: { c1: { count: 300 } } });
  });

  it('compares a field changed in place key by key when the window does not name what was added', async () => {
    const o = { dir: path.join(dir, `t${seq++}`), name: 'runs' };
    const a = JournalWindowStore.open<{ seen: Record<string, 1> }>(o);
    await a.save([{ key: 'run', window: { seen: { s0: 1 } }, expectRev: 0 }]);
    const stored = (await a.load(['run'])).get('run')!;
    stored.seen.s1 = 1;
    await a.save([{ key: 'run', window: { ...stored }, expectRev: 1 }]);
    expect((await JournalWindowStore.open<{ seen: Record<string, 1> }>(o).load(['run'])).get('run')).toEqual({ seen: { s0: 1, s1: 1 } });
  });

  it('keeps a window an edit renewed after its earlier record expired', async () => {
    let now = 1_000_000;
    const f = opener({ now: () => now });
    const a = f.open();
    await a.save([{ key: 'r', window: w('r', 1), ttlMs: 1_000 }]);
    now += 900;
    await a.save([{ key: 'r', window: w('r', 2), ttlMs: 1_000 }]);
    expect(a.stats.edited).toBe(1);
    now += 500; // past the first record's expiry, before the second's
    expect(await contents(f.open(), ['r'])).toEqual({ r: w('r', 2) });
    now += 600;
    expect(await contents(f.open(), ['r'])).toEqual({});
  });

  it('keeps no copy of an ended run\'s window and few of them in memory; a late save is written whole, and a crash reads every window back exactly, as few in memory', async () => {
    const f = opener({ maxWindows: 50_000, maxResting: 3 });
    const a = f.open();
    const last = new Map<string, W>();
    const save = async (k: string, n: number, rest?: boolean) => {
      last.set(k, w(k, n));
      await a.save([{ key: k, window: w(k, n), ttlMs: 3_600_000, ...(rest ? { rest } : {}) }]);
    };
    // 20 runs: each saved twice going on (whole, then edits), then once as it ends.
    for (let i = 0; i < 20; i++) {
      await save(`r${i}`, 1);
      await save(`r${i}`, 2);
    }
    expect(a.stats).toMatchObject({ copies: 20, whole: 20, edited: 20 });
    for (let i = 0; i < 15; i++) await save(`r${i}`, 3, true);
    // The end is journaled as edits to the copy; then the copy goes, and all but 3 ended windows leave memory.
    expect(a.stats).toMatchObject({ copies: 5, whole: 20, edited: 35, inMemory: 8, spilled: 12 });
    // A late span of an ended run: loaded from the spill file, saved at rest again, written whole.
    expect((await a.load(['r0'])).get('r0')).toEqual(w('r0', 3));
    await save('r0', 4, true);
    expect(a.stats).toMatchObject({ copies: 5, whole: 21 });
    // A crash: every window is read back as last saved, at rest or not, in memory or spilled;
    // the journal says which were at rest, so as few of them come back into memory.
    const keys = Array.from({ length: 20 }, (_, i) => `r${i}`);
    const b = f.open();
    expect(b.stats).toMatchObject({ inMemory: 8, spilled: 12 });
    expect(await contents(b, keys)).toEqual(Object.fromEntries([...last].sort(([x], [y]) => x.localeCompare(y))));
    await b.close();
    // The same from a snapshot (a compaction says which windows were at rest, spilled or not).
    const c = f.open();
    c.compact();
    await c.compacted();
    expect(fs.statSync(f.journal).size).toBe(0);
    const d = f.open();
    expect(d.stats).toMatchObject({ inMemory: 8, spilled: 12 });
    expect(await contents(d, keys)).toEqual(Object.fromEntries([...last].sort(([x], [y]) => x.localeCompare(y))));
    await d.close();
  });

  it('drops the wake of a window that expired while it was closed with the window; a wake of a key never saved stays', async () => {
    let now = 1_000_000;
    const f = opener({ now: () => now });
    const a = f.open();
    await a.save([{ key: 'r1', window: w('r1', 1), ttlMs: 1_000 }, { key: 'r2', window: w('r2', 1), ttlMs: 600_000 }]);
    await a.setWakes(['r1', 'r2', 'bare'].map((key) => ({ key, atMs: now + 250 })));
    await a.close();
    // Down longer than r1's ttl: r1 is gone, and so is its wake (a tick took it every lease).
    now += 60_000;
    const b = f.open();
    expect(Object.keys(await contents(b, ['r1', 'r2']))).toEqual(['r2']);
    expect((await b.takeDue(now, 10, 5_000)).sort()).toEqual(['bare', 'r2']);
    await b.close();
  });

  it('journals the wakes clearOrphanWakes drops, of keys with no window now, and only those', async () => {
    let now = 1_000_000;
    const f = opener({ now: () => now });
    const a = f.open();
    await a.save([{ key: 'r1', window: w('r1', 1), ttlMs: 1_000 }, { key: 'r2', window: w('r2', 1), ttlMs: 600_000 }]);
    await a.setWakes(['r1', 'r2'].map((key) => ({ key, atMs: now + 250 })));
    now += 5_000;
    await a.clearOrphanWakes(['r1', 'r2']);
    expect(await a.takeDue(now, 10)).toEqual(['r2']);
    // The drop is in the journal: read back at a time r1 still lived, it has no wake.
    now = 1_000_100;
    const b = f.open();
    expect(Object.keys(await contents(b, ['r1', 'r2']))).toEqual(['r1', 'r2']);
    expect(await b.takeDue(now + 1_000, 10)).toEqual([]);
    await b.close();
  });

  it('close() keeps the files: the next open reads them', async () => {
    const f = opener({ maxWindows: 10 });
    const a = f.open();
    for (let i = 0; i < 100; i++) await a.save([{ key: `r${i}`, window: w(`r${i}`, i) }]);
    await a.close();
    const b = f.open();
    expect(b.stats.inMemory).toBe(10);
    const keys = Array.from({ length: 100 }, (_, i) => `r${i}`);
    expect(Object.keys(await contents(b, keys))).toHaveLength(100);
    await b.close();
  });
});

describe('JournalWindowStore with coalesced saves (the rule engine\'s checkpoints)', () => {
  /** A store whose checkpoints run only when the test calls them, and whose busy windows the test names. */
  function coalesced(extra: Partial<JournalWindowStoreOptions> = {}) {
    const f = opener(extra);
    const busy = new Set<string>();
    const open = () => {
      const s = f.open();
      s.coalesce({ everyMs: 3_600_000, busy: (k) => busy.has(k) });
      return s;
    };
    return { ...f, busy, open };
  }
  /** Whether a promise settled by now (after the microtasks and one turn). */
  async function settled(p: Promise<unknown>): Promise<boolean> {
    let done = false;
    p.then(() => (done = true), () => (done = true));
    await new Promise((r) => setImmediate(r));
    return done;
  }

  it('a save resolves only once a checkpoint synced it, and the window saved often is written once, as last saved', async () => {
    const f = coalesced();
    const a = f.open();
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 5; i++) saves.push(a.save([{ key: 'r', window: w('r', i), ttlMs: 60_000, expectRev: i - 1 }]));
    saves.push(a.save([{ key: 'q', window: w('q', 1) }]));
    expect(await settled(Promise.race(saves))).toBe(false);
    // what a crash now leaves: nothing of those saves (their batches are delivered again)
    expect(await contents(f.open(), ['r', 'q'])).toEqual({});
    expect(await a.load(['r'])).toEqual(new Map([['r', w('r', 5)]]));

    a.checkpoint();
    await Promise.all(saves);
    expect(a.stats.checkpoints).toMatchObject({ written: 1, windows: 2 });
    expect(a.stats.whole + a.stats.edited).toBe(2);
    const b = f.open();
    expect(await contents(b, ['r', 'q'])).toEqual({ q: w('q', 1), r: w('r', 5) });
    // the revision kept: the next save's compare-and-set goes on from it
    await expect(b.save([{ key: 'r', window: w('r', 6), expectRev: 4 }])).rejects.toBeInstanceOf(WindowConflictError);
  });

  it('leaves a window a step is changing for its next save, so what the step changed unsaved never reaches the disk', async () => {
    const f = coalesced();
    const a = f.open();
    await Promise.all([a.save([{ key: 'r', window: w('r', 1) }]), Promise.resolve(a.checkpoint())]);
    const saved = a.save([{ key: 'r', window: w('r', 2) }]);
    // a step loads it and changes it in place; its findings are not published yet
    const live = (await a.load(['r'])).get('r')!;
    f.busy.add('r');
    live.n = 99;
    live.list.push('unsaved');
    a.checkpoint();
    expect(await settled(saved)).toBe(false);
    expect(a.stats.checkpoints.busy).toBe(1);
    // a crash now: the window as last journaled, not the step's changes
    expect(await contents(f.open(), ['r'])).toEqual({ r: w('r', 1) });

    // the step's commit saves it: written in the save's turn, both saves done with that record
    f.busy.delete('r');
    const next = { ...live, n: 100 };
    const commit = a.save([{ key: 'r', window: next }]);
    await Promise.all([saved, commit]);
    expect(await contents(f.open(), ['r'])).toEqual({ r: next });
  });

  it('a window busy at one checkpoint is written at the next once no step changes it', async () => {
    const f = coalesced();
    const a = f.open();
    const saved = a.save([{ key: 'r', window: w('r', 1) }]);
    f.busy.add('r');
    a.checkpoint();
    expect(await settled(saved)).toBe(false);
    f.busy.delete('r');
    a.checkpoint();
    await saved;
    expect(await contents(f.open(), ['r'])).toEqual({ r: w('r', 1) });
  });

  it('compacts with windows saved since their record and windows mid-step as last journaled, and waits for a mid-step window it holds no copy of', async () => {
    const f = coalesced();
    const a = f.open();
    const first = [a.save([{ key: 'dirty', window: w('dirty', 1) }]), a.save([{ key: 'busy', window: w('busy', 1) }])];
    a.checkpoint();
    await Promise.all(first);
    const dirty = a.save([{ key: 'dirty', window: { run: 'dirty', n: 2, list: ['x'] } }]);
    const live = (await a.load(['busy'])).get('busy')!;
    f.busy.add('busy');
    live.n = 99;
    a.compact();
    // a crash right after: each window as journaled, the step's change left out
    expect(await contents(f.open(), ['dirty', 'busy'])).toEqual({ dirty: w('dirty', 1), busy: w('busy', 1) });
    // the records that follow apply over the snapshot: the dirty window's edits, the busy one's at its save
    a.checkpoint();
    await dirty;
    f.busy.delete('busy');
    const commit = a.save([{ key: 'busy', window: { ...live, n: 100 } }]);
    a.checkpoint();
    await commit;
    expect(await contents(f.open(), ['dirty', 'busy'])).toEqual({ dirty: { run: 'dirty', n: 2, list: ['x'] }, busy: { ...w('busy', 1), n: 100 } });

    // a window mid-step that the store keeps no journaled copy of (more windows than editedWindows):
    // a compaction in one go is put off; one in the background waits for the step
    const g = coalesced({ editedWindows: 1, compactBytes: 1 });
    const c = g.open();
    const both = [c.save([{ key: 'old', window: w('old', 1) }]), c.save([{ key: 'new', window: w('new', 1) }])];
    c.checkpoint();
    await Promise.all(both);
    await c.compacted();
    const compactions = c.stats.compactions;
    const old = (await c.load(['old'])).get('old')!;
    g.busy.add('old');
    old.n = 99;
    expect(() => c.compact()).toThrow(/put off: a window is mid-step/);
    // a record larger than the snapshot: the background compaction begins, and meets `old` mid-step
    const big = c.save([{ key: 'new', window: { run: 'new', n: 2, list: Array.from({ length: 300 }, (_, i) => `item ${i}`) } }]);
    c.checkpoint();
    await big;
    await new Promise((r) => setTimeout(r, 50));
    expect(c.stats.compactions).toBe(compactions);
    // the step's commit: `old` saved, no longer busy; the compaction goes on and takes it as saved
    const committed = c.save([{ key: 'old', window: { ...old, n: 100 } }]);
    g.busy.delete('old');
    c.checkpoint();
    await committed;
    await c.compacted();
    expect(c.stats.compactions).toBeGreaterThan(compactions);
    expect(c.stats.postponed).toBe(0);
    expect(c.stats.compactionError).toBeUndefined();
    expect((await contents(g.open(), ['old'])).old).toEqual({ ...w('old', 1), n: 100 });
  });

  it('a delete settles the saves of the window not journaled yet; close() writes what no step is changing and fails the saves of a window still mid-step', async () => {
    const f = coalesced();
    const a = f.open();
    const gone = a.save([{ key: 'gone', window: w('gone', 1) }]);
    await a.delete(['gone']);
    await gone;
    const kept = a.save([{ key: 'kept', window: w('kept', 1) }]);
    const stuck = a.save([{ key: 'stuck', window: w('stuck', 1) }]);
    f.busy.add('stuck');
    const refused = expect(stuck).rejects.toThrow(/closed before the window was journaled/);
    await a.close();
    await kept;
    await refused;
    expect(await contents(f.open(), ['gone', 'kept', 'stuck'])).toEqual({ kept: w('kept', 1) });
  });

  it('writes wake times set with the saves at the checkpoint too, as they are then', async () => {
    const f = coalesced();
    const a = f.open();
    const saved = a.save([{ key: 'r', window: w('r', 1) }]);
    const woken = a.setWakes([{ key: 'r', atMs: 500 }]);
    const earlier = a.wakeAt([{ key: 'r', atMs: 300 }]);
    expect(await settled(Promise.race([woken, earlier]))).toBe(false);
    expect(await f.open().takeDue(1_000, 10)).toEqual([]);
    const syncs = a.stats.syncs;
    a.checkpoint();
    await Promise.all([saved, woken, earlier]);
    // one record, one sync, for the window and its wake
    expect(a.stats.syncs).toBe(syncs + 1);
    const b = f.open();
    expect(await b.takeDue(299, 10)).toEqual([]);
    expect(await b.takeDue(300, 10)).toEqual(['r']);
  });

  it('reads back a ring shifted by several saves between two checkpoints exactly (each save says only its own shift)', async () => {
    const f = coalesced();
    const a = f.open();
    let list = ['a', 'b', 'c', 'd'];
    const first = a.save([{ key: 'r', window: { run: 'r', n: 0, list } }]);
    a.checkpoint();
    await first;
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 3; i++) {
      // the ring keeps four: one dropped from its start, one appended, as the question scheduler marks it
      list = [...list.slice(1), `new${i}`];
      saves.push(a.save([{ key: 'r', window: markShifted({ run: 'r', n: i, list }, { list: { dropped: 1, appended: 1 } }) }]));
    }
    a.checkpoint();
    await Promise.all(saves);
    expect(await contents(f.open(), ['r'])).toEqual({ r: { run: 'r', n: 3, list: ['d', 'new1', 'new2', 'new3'] } });
    // one save since the last checkpoint: its shift is the window's, and is journaled as one
    list = [...list.slice(1), 'new4'];
    const one = a.save([{ key: 'r', window: markShifted({ run: 'r', n: 4, list }, { list: { dropped: 1, appended: 1 } }) }]);
    a.checkpoint();
    await one;
    expect(await contents(f.open(), ['r'])).toEqual({ r: { run: 'r', n: 4, list: ['new1', 'new2', 'new3', 'new4'] } });
  });

  it('checkpoints on its own at its interval', async () => {
    const f = opener();
    const a = f.open();
    a.coalesce({ everyMs: 20 });
    const t = Date.now();
    await a.save([{ key: 'r', window: w('r', 1) }]);
    expect(Date.now() - t).toBeLessThan(5_000);
    expect(a.stats.checkpoints.written).toBeGreaterThanOrEqual(1);
    expect(await contents(f.open(), ['r'])).toEqual({ r: w('r', 1) });
    await a.close();
  });
});
