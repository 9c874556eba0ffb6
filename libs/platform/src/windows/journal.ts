import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { addedKeys, layerBase, shiftedArrays, type WindowSave, type WindowStore } from '@neatroots/ports';
import { type Change, JournalFile, SNAPSHOT_WAIT, type Stored } from './journal-file';
import { MemoryWindowStore } from './memory';
import { applyEdits, copyJson, diffInto, type Edit, isJsonObject, JOURNALED, shiftInto } from './patch';

/**
 * Run windows that survive a crash of the embedded deployment: MemoryWindowStore (its cap and
 * spill file kept), with every change appended to a journal in the data folder and synced
 * before the call returns (saves: at the next checkpoint, when coalesced; below). The rule
 * engine saves a batch's windows before it lets the bus position move, so after a crash the
 * windows are those saved with the last position kept, and
 * the batches after it are replayed against them: the same findings, the same ids, none twice.
 *
 * The journal is read at open (a torn last record cut off) and compacted into a snapshot once it
 * passes `compactBytes`.
 *
 * A window saved again is journaled as the edits the save made to it (patch.ts), against a copy
 * of the window as last journaled that the store keeps for the `editedWindows` most recently
 * written windows; any other save writes the window whole and starts its chain again.
 *
 * Coalesced saves (`coalesce`, the rule engine's stores): a save is made in memory at once, and
 * its record is written at the next checkpoint (every `everyMs`, or sooner once 256 saves wait),
 * one record per window however often it was saved since; the save's promise resolves once that
 * record is synced, so the bus position still moves only past batches whose windows are on
 * disk. A fleet's batches touch a run's window on nearly every span: journaled per save, the
 * comparison and encoding of every save were a fifth of the embedded default's main thread.
 * Windows are changed in place by the caller (loadsStored), so a checkpoint writes only windows
 * no step is changing (`busy`): a busy one waits for its next save, where it is written in the
 * save's turn.
 */
export interface JournalWindowStoreOptions {
  /** The folder of the journal and snapshot (the data folder's windows/). */
  dir: string;
  /** The store's name: its files are <name>.journal, <name>.snapshot, <name>.spill. */
  name: string;
  maxWindows?: number;
  compactBytes?: number;
  now?: () => number;
  /** Windows whose last journaled copy is kept to journal their next save as edits (default: 10,000, at most maxWindows). */
  editedWindows?: number;
  /** Windows at rest (their run ended, WindowSave.rest) kept in memory; the others wait in the spill file. Default: no bound of their own. */
  maxResting?: number;
}

const expiry = (x: number | null) => (x === null ? Infinity : x);
const stored = (x: number) => (x === Infinity ? null : x);

export class JournalWindowStore<W> implements WindowStore<W> {
  private readonly mem: MemoryWindowStore<W>;
  private readonly file: JournalFile<W>;
  /**
   * The window as last journaled (a private copy: the engine changes the windows it loads), by
   * key, with its revision: the next save of that revision is journaled as edits to it. Oldest
   * written first; past `maxEdited` the oldest is forgotten and its next save written whole.
   */
  private readonly journaled = new Map<string, { w: Record<string, unknown>; r: number }>();
  private readonly maxEdited: number;
  /**
   * Windows whose last save was at rest and is not journaled yet: once it is, no copy is kept
   * for them (a later save, for a late span, is written whole).
   */
  private readonly atRest = new Set<string>();
  /** While the journal is read back: no window counts as expired (an edit may renew one, see open). */
  private opening = false;
  /** Saves journaled as edits and whole. */
  private readonly records = { edited: 0, whole: 0 };
  /** Coalesced saves (coalesce): how often a checkpoint runs, and the callers' busy windows. */
  private coalesced: { everyMs: number; busy: ((key: string) => boolean)[]; timer: NodeJS.Timeout } | undefined;
  /**
   * Windows saved and not journaled since (coalesced saves): the saves waiting for their record,
   * and whether each save's revision followed the one before from the journaled copy's (edits
   * are written only then, as for a save journaled alone).
   */
  private readonly dirty = new Map<string, { waiting: SaveWaiter[]; chain: boolean; rev: number; saves: number }>();
  /** Keys whose wake times changed since the last checkpoint (coalesced saves), and the calls waiting for their record. */
  private readonly wakesDirty = new Set<string>();
  private wakesWaiting: SaveWaiter[] = [];
  /** Dirty windows a checkpoint found busy: written at their next save, in its turn, or by a checkpoint that finds them idle. */
  private readonly overdue = new Set<string>();
  /** Saves since the last checkpoint, whether one is queued for the next turn, and whether one is being written. */
  private savesSince = 0;
  private soon = false;
  private checkpointing = false;
  /** Checkpoints written, windows they held, and windows they found busy. */
  readonly checkpoints = { written: 0, windows: 0, busy: 0 };
  /**
   * Each change is made in memory and its record queued in the call's turn; records are
   * synced in that order (the port's appliedAtCall): the rule engine's next batch goes on
   * while the last one's save is syncing, and the bus keeps its position until it is synced.
   */
  readonly appliedAtCall = true;
  /** load hands out the windows in memory (the port's loadsStored); a save's layers are merged before its record is written. */
  readonly loadsStored = true;

  private constructor(opts: JournalWindowStoreOptions) {
    const now = opts.now ?? Date.now;
    this.maxEdited = Math.min(opts.editedWindows ?? 10_000, opts.maxWindows ?? Infinity);
    this.mem = new MemoryWindowStore<W>({
      now: () => (this.opening ? -Infinity : now()),
      maxWindows: opts.maxWindows ?? Infinity,
      maxResting: opts.maxResting,
      spillFile: path.join(opts.dir, `${opts.name}.spill`),
    });
    this.file = new JournalFile<W>({ dir: opts.dir, name: opts.name, compactBytes: opts.compactBytes ?? 64 * 1024 * 1024, snapshot: () => this.snapshot() });
  }

  /** Opens the store, reading back what the journal holds. */
  static open<W>(opts: JournalWindowStoreOptions): JournalWindowStore<W> {
    const s = new JournalWindowStore<W>(opts);
    s.readBack(opts);
    return s;
  }

  /**
   * Replays the snapshot and the journals. A window expired by now is still kept while they are
   * read: a later record may be edits that renewed it. A change a window already holds (a
   * snapshot written while the journal went on, see journal-file.ts) is skipped by its sequence
   * number: `held` is the last one applied to each window.
   */
  private readBack(opts: JournalWindowStoreOptions): void {
    const held = new Map<string, number>();
    /** Edits read for a window not there (it expired or was deleted before the snapshot was written). */
    const orphans = new Map<string, { x: number | null; seq: number }>();
    this.opening = true;
    try {
      for (const c of this.file.open()) this.apply(c, held, orphans);
    } finally {
      this.opening = false;
    }
    const now = (opts.now ?? Date.now)();
    for (const [k, o] of orphans) {
      if (expiry(o.x) > now) throw new Error(`window journal ${path.join(opts.dir, opts.name)}.journal: record ${o.seq} edits window ${JSON.stringify(k)}, which no earlier record holds; move the folder's ${opts.name}.* files aside to start without the windows they hold`);
    }
    // What expired while the process was down is gone, as if it had been swept, with its wake
    // (a wake kept for a window not there was taken by the rule engine's tick every lease).
    const expired = this.mem.liveKeys().filter((k) => (this.mem.stateOf(k)?.expiresAt ?? -Infinity) <= now);
    for (const k of expired) this.mem.restore(k, undefined as W, -Infinity, 0);
    this.mem.clearOrphanWakesNow(expired);
  }

  private apply({ change: c, seq }: Stored<W>, held: Map<string, number>, orphans: Map<string, { x: number | null; seq: number }>): void {
    const fresh = (k: string, at: number) => {
      if ((held.get(k) ?? -1) >= at) return false;
      held.set(k, at);
      return true;
    };
    for (const p of c.put ?? []) {
      if (!fresh(p.k, p.q ?? seq)) continue;
      orphans.delete(p.k);
      this.mem.restore(p.k, p.w, expiry(p.x), p.r, p.z === 1);
    }
    for (const p of c.patch ?? []) {
      if (!fresh(p.k, seq)) continue;
      const base = this.mem.peek(p.k);
      if (!base || orphans.has(p.k) || !isJsonObject(base.window)) {
        orphans.set(p.k, { x: p.x, seq });
        continue;
      }
      applyEdits(base.window as Record<string, unknown>, p.d);
      this.mem.restore(p.k, base.window, expiry(p.x), p.r, p.z === 1);
    }
    if (c.del) {
      const del = c.del.filter((k) => fresh(k, seq));
      for (const k of del) orphans.delete(k);
      this.mem.deleteNow(del);
    }
    if (c.wake) this.mem.setWakesNow(c.wake.map((w) => ({ key: w.k, atMs: w.at })));
  }

  /**
   * The live state as changes, read while the store goes on changing (compaction writes it a
   * slice at a time): the keys are taken at once, each window read as it is when its turn
   * comes (a change made meanwhile is in the journal begun with the compaction, replayed after
   * the snapshot), a few windows a record so each slice stays short.
   */
  private *snapshot(): Generator<Change<W> | typeof SNAPSHOT_WAIT> {
    let put: NonNullable<Change<W>['put']> = [];
    for (const key of this.mem.liveKeys()) {
      let e = this.mem.peek(key);
      // A window a step is changing, with no journaled copy: read once the step is done (what is
      // read so far goes first: each window is written in the turn it is read).
      while (e && this.coalesced && !this.journaled.has(key) && this.isBusy(key)) {
        if (put.length) yield { put };
        put = [];
        yield SNAPSHOT_WAIT;
        e = this.mem.peek(key);
      }
      if (!e) continue;
      // Every change made to it so far has a lower sequence number than the next (see journal-file.ts).
      put.push({ k: key, ...this.asJournaled(key, e), x: stored(e.expiresAt), q: this.file.nextSeq - 1, ...(this.mem.atRest(key) ? { z: 1 as const } : {}) });
      if (put.length >= 32) {
        yield { put };
        put = [];
      }
    }
    if (put.length) yield { put };
    const wakes = this.mem.wakeList();
    if (wakes.length) yield { wake: wakes.map((w) => ({ k: w.key, at: w.atMs })) };
  }

  /**
   * A window as the journal holds it, for a snapshot: a window saved since its last record (its
   * record still to come, coalesced saves) or one a step is changing is taken as last journaled.
   * One dirty with no journaled copy is taken as saved: its record, whole (there is no copy to
   * edit), follows. (The snapshot waits for a busy one with no copy: see snapshot.)
   */
  private asJournaled(key: string, e: { window: W; rev: number }): { w: W; r: number } {
    if (!this.coalesced || (!this.dirty.has(key) && !this.isBusy(key))) return { w: e.window, r: e.rev };
    const j = this.journaled.get(key);
    return j ? { w: j.w as W, r: j.r } : { w: e.window, r: e.rev };
  }

  async load(keys: readonly string[]): Promise<Map<string, W>> {
    return this.mem.load(keys);
  }

  // Each change is made in memory and its record queued in the same turn (records in the order
  // of the changes); the call returns once the record is synced.

  async save(entries: readonly WindowSave<W>[]): Promise<void> {
    if (!entries.length) return;
    if (this.coalesced) return this.saveCoalesced(entries);
    const layers = this.layersOf(entries);
    this.mem.saveNow(entries);
    this.noteRest(entries);
    // The last entry of a key wins, as in memory.
    const last = new Map(entries.map((e) => [e.key, e.window]));
    const change: Change<W> = {};
    for (const [k, w] of last) {
      const st = this.mem.stateOf(k)!;
      // Edits only on the revision journaled just before: a window that expired, was deleted or
      // was saved twice in one call starts again from a whole record.
      this.record(change, k, w, stored(st.expiresAt), st.rev, this.journaled.get(k)?.r === st.rev - 1, layers?.get(k));
    }
    await this.file.append(change);
  }

  /** A window's record, added to `change`: its edits against the journaled copy when `chain`, else whole. */
  private record(change: Change<W>, k: string, w: W, x: number | null, r: number, chain: boolean, layers?: Map<string, Record<string, unknown>>, marks = true): void {
    const prev = this.journaled.get(k);
    // At rest: said in the record (read back, it goes where such windows are kept), and no copy
    // is kept after it: the copy would wait for a save that rarely comes.
    const rest = this.atRest.delete(k);
    const z = rest ? { z: 1 as const } : {};
    if (prev && chain && isJsonObject(w)) {
      const d: Edit[] = [];
      diffInto(prev.w, w, d, [], marks ? this.shifts(prev.w, w, d, layers) : layers);
      prev.r = r;
      (change.patch ??= []).push({ k, d, x, r, ...z });
      this.records.edited++;
    } else {
      // The copy is written (a window a step layered over the stored one, see copyJson, whole).
      const copy = copyJson(w);
      if (isJsonObject(copy)) this.remember(k, copy, r);
      (change.put ??= []).push({ k, w: copy, x, r, ...z });
      this.records.whole++;
    }
    if (rest) this.journaled.delete(k);
  }

  /** Which of the saved windows are at rest (their copies are dropped once journaled). */
  private noteRest(entries: readonly WindowSave<W>[]): void {
    for (const e of entries) {
      if (e.rest) this.atRest.add(e.key);
      else this.atRest.delete(e.key);
    }
  }

  /**
   * Saves coalesced from now on (see the class comment): a checkpoint every `everyMs` writes the
   * windows saved since, except those `busy` says a step is changing. Callers that change the
   * windows they load in place must say which they are changing; several callers may share the
   * store (their busy windows add up, the shortest interval counts).
   */
  coalesce(opts: { everyMs: number; busy?: (key: string) => boolean }): void {
    if (!(opts.everyMs > 0)) return;
    if (this.coalesced) {
      if (opts.busy) this.coalesced.busy.push(opts.busy);
      if (opts.everyMs >= this.coalesced.everyMs) return;
      clearInterval(this.coalesced.timer);
    }
    const busy = this.coalesced?.busy ?? (opts.busy ? [opts.busy] : []);
    const timer = setInterval(() => this.checkpoint(), opts.everyMs);
    timer.unref();
    this.coalesced = { everyMs: opts.everyMs, busy, timer };
  }

  private isBusy(k: string): boolean {
    const busy = this.coalesced?.busy;
    if (!busy) return false;
    for (let i = 0; i < busy.length; i++) if (busy[i](k)) return true;
    return false;
  }

  private saveCoalesced(entries: readonly WindowSave<W>[]): Promise<void> {
    this.mem.saveNow(entries);
    this.noteRest(entries);
    return new Promise<void>((resolve, reject) => {
      const waiter: SaveWaiter = { left: 0, resolve, reject };
      let now: string[] | undefined;
      for (const e of entries) {
        const st = this.mem.stateOf(e.key)!;
        let d = this.dirty.get(e.key);
        if (!d) this.dirty.set(e.key, (d = { waiting: [], chain: this.journaled.get(e.key)?.r === st.rev - 1, rev: st.rev, saves: 1 }));
        else {
          // A revision that did not follow (the window expired and began again, saved twice in one call): whole.
          d.chain &&= st.rev === d.rev + 1;
          d.rev = st.rev;
          d.saves++;
        }
        if (!d.waiting.includes(waiter)) {
          d.waiting.push(waiter);
          waiter.left++;
        }
        if (this.overdue.has(e.key)) (now ??= []).push(e.key);
      }
      // A window a checkpoint found busy is written now, while its caller is done with it.
      if (now) this.journalKeys(now);
      if (++this.savesSince >= SAVES_PER_CHECKPOINT && !this.soon) {
        // Enough saves wait (the bus holds a partition's batches in flight to a bound): a checkpoint next turn.
        this.soon = true;
        setImmediate(() => this.checkpoint());
      }
    });
  }

  /**
   * Writes every dirty window no caller is changing (coalesced saves); the busy ones at their
   * next save. A few milliseconds at a time (a checkpoint of thousands of windows in one turn
   * held every export and finding behind it), one record a slice; each window is looked at and
   * written in one turn, so a step that begins between slices finds it written or still dirty.
   * `all`: in one go (close).
   */
  checkpoint(all = false): void {
    this.soon = false;
    this.savesSince = 0;
    if (this.checkpointing || (!this.dirty.size && !this.wakesDirty.size) || this.closed) return;
    const keys = [...this.dirty.keys()];
    this.checkpointing = true;
    this.checkpoints.written++;
    const slice = (from: number) => {
      const started = performance.now();
      const batch: Batch<W> = { change: {}, waiting: [] };
      if (from === 0 && this.wakesDirty.size) {
        batch.change.wake = this.wakes([...this.wakesDirty]);
        batch.waiting.push(...this.wakesWaiting);
        this.wakesDirty.clear();
        this.wakesWaiting = [];
      }
      let i = from;
      while (i < keys.length) {
        const k = keys[i++];
        if (!this.dirty.has(k)) continue;
        if (this.isBusy(k)) {
          if (!this.overdue.has(k)) this.checkpoints.busy++;
          this.overdue.add(k);
          continue;
        }
        this.addToBatch(batch, k);
        if (!all && (i & 15) === 0 && performance.now() - started > CHECKPOINT_SLICE_MS) break;
      }
      this.writeBatch(batch);
      if (i < keys.length && !this.closed) setImmediate(() => slice(i));
      else this.checkpointing = false;
    };
    slice(0);
  }

  /** See the port's releaseBusy: the saves waiting for a busy window fail; the window stays as journaled. */
  releaseBusy(): number {
    if (!this.coalesced) return 0;
    let n = 0;
    for (const [k, d] of this.dirty) {
      if (!this.isBusy(k)) continue;
      this.dirty.delete(k);
      this.overdue.delete(k);
      n++;
      for (const w of d.waiting) w.reject(new Error('the window was still being changed by a step that did not finish when its caller stopped: not journaled'));
    }
    return n;
  }

  /** One record for these dirty windows, as each is now (a window a checkpoint found busy, at its save). */
  private journalKeys(keys: readonly string[]): void {
    const batch: Batch<W> = { change: {}, waiting: [] };
    for (const k of keys) this.addToBatch(batch, k);
    this.writeBatch(batch);
  }

  /** A dirty window's record added to the batch, as the window is now; its saves wait for the batch. */
  private addToBatch(batch: Batch<W>, k: string): void {
    const d = this.dirty.get(k);
    if (!d) return;
    this.dirty.delete(k);
    this.overdue.delete(k);
    for (const w of d.waiting) batch.waiting.push(w);
    this.checkpoints.windows++;
    // Gone since it was saved (expired: its records expire with it at the next start).
    const e = this.mem.peek(k);
    // What the last save says it shifted (markShifted) is the change since the record before only
    // when it is the one save since: after several, the arrays are compared.
    if (e) this.record(batch.change, k, e.window, stored(e.expiresAt), e.rev, d.chain, undefined, d.saves === 1);
    else this.atRest.delete(k);
  }

  /** Appends the batch's record; its saves resolve once it is synced. */
  private writeBatch({ change, waiting }: Batch<W>): void {
    if (!waiting.length) return;
    settleWith(change.put || change.patch || change.wake ? this.file.append(change) : Promise.resolve(), waiting);
  }

  /**
   * The fields a step changed as layers over the stored window's own (the port's loadsStored:
   * the question scheduler's span ids), read before the save merges them into the stored
   * window (memory.ts), and the fields changed in place whose added keys the window names
   * (markAdded: the rule engine's span ids): their edits are those entries, not a comparison of
   * the whole field with the journal's copy. The rest of the stored field is what the journal
   * last wrote: a layer lies over it unchanged, and a caller that changes a field in place names
   * every key it added since the window's last save.
   */
  private layersOf(entries: readonly { key: string; window: W }[]): Map<string, Map<string, Record<string, unknown>>> | undefined {
    let out: Map<string, Map<string, Record<string, unknown>>> | undefined;
    for (const e of entries) {
      const w = e.window;
      if (!this.journaled.has(e.key) || !isJsonObject(w)) continue;
      const held = this.mem.peek(e.key)?.window;
      if (!isJsonObject(held)) continue;
      const added = addedKeys(w);
      for (const f in w) {
        const v = w[f];
        if (typeof v !== 'object' || v === null) continue;
        const base = layerBase(v);
        let layer: Record<string, unknown>;
        if (base !== undefined && base === held[f]) layer = v as Record<string, unknown>;
        else if (added?.[f] && v === held[f]) layer = entriesAt(v as Record<string, unknown>, added[f]);
        else continue;
        out ??= new Map();
        let m = out.get(e.key);
        if (!m) out.set(e.key, (m = new Map()));
        m.set(f, layer);
      }
    }
    return out;
  }

  /**
   * The shifts of the array fields the saved window says were only shifted (markShifted),
   * written into `d` and made to the journal's copy; returns the layers with those fields
   * marked as journaled for diffInto to pass over.
   */
  private shifts(
    copy: Record<string, unknown>,
    w: Record<string, unknown>,
    d: Edit[],
    layers: Map<string, Record<string, unknown>> | undefined,
  ): ReadonlyMap<string, Record<string, unknown> | typeof JOURNALED> | undefined {
    const shifted = shiftedArrays(w);
    if (!shifted) return layers;
    const over = new Map<string, Record<string, unknown> | typeof JOURNALED>(layers ?? []);
    for (const f of Object.keys(shifted)) {
      const { dropped, appended } = shifted[f];
      if (shiftInto(copy, f, w[f], dropped, appended, d)) over.set(f, JOURNALED);
    }
    return over;
  }

  private remember(k: string, w: Record<string, unknown>, r: number): void {
    this.journaled.delete(k);
    this.journaled.set(k, { w, r });
    if (this.journaled.size > this.maxEdited) this.journaled.delete(this.journaled.keys().next().value as string);
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (!keys.length) return;
    this.mem.deleteNow(keys);
    // Saves not journaled yet of a deleted window are done with the delete's record.
    const waiting: SaveWaiter[] = [];
    for (const k of keys) {
      this.journaled.delete(k);
      this.atRest.delete(k);
      const d = this.dirty.get(k);
      if (!d) continue;
      this.dirty.delete(k);
      this.overdue.delete(k);
      waiting.push(...d.waiting);
    }
    const done = this.file.append({ del: [...keys] });
    settleWith(done, waiting);
    await done;
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    if (!entries.length) return;
    this.mem.wakeAtNow(entries);
    if (this.coalesced) return this.wakeLater(entries);
    await this.file.append({ wake: this.wakes(entries.map((e) => e.key)) });
  }

  async setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void> {
    if (!entries.length) return;
    this.mem.setWakesNow(entries);
    if (this.coalesced) return this.wakeLater(entries);
    await this.file.append({ wake: entries.map((e) => ({ k: e.key, at: e.atMs })) });
  }

  async clearOrphanWakes(keys: readonly string[]): Promise<void> {
    const cleared = this.mem.clearOrphanWakesNow(keys);
    if (!cleared.length) return;
    if (this.coalesced) return this.wakeLater(cleared.map((key) => ({ key })));
    await this.file.append({ wake: cleared.map((k) => ({ k, at: null })) });
  }

  /**
   * Coalesced saves: wake times set with a step's save go with the next checkpoint too (each one
   * its own sync cost as much as the saves), written as the keys' wake times then: a record of
   * state, so the order of such records against the immediate ones (takeDue) does not matter.
   */
  private wakeLater(entries: readonly { key: string }[]): Promise<void> {
    for (const e of entries) this.wakesDirty.add(e.key);
    return new Promise<void>((resolve, reject) => this.wakesWaiting.push({ left: 1, resolve, reject }));
  }

  /** Taken keys are journaled too (removed or leased): a crash would otherwise wake them again. */
  async takeDue(nowMs: number, limit: number, leaseMs?: number): Promise<string[]> {
    const keys = this.mem.takeDueNow(nowMs, limit, leaseMs);
    if (keys.length) await this.file.append({ wake: this.wakes(keys) });
    return keys;
  }

  private wakes(keys: string[]): { k: string; at: number | null }[] {
    return [...new Set(keys)].map((k) => ({ k, at: this.mem.wakeOf(k) ?? null }));
  }

  /** Windows in memory, windows spilled, journal syncs, compactions, bytes cut from a torn tail. */
  get stats() {
    return { inMemory: this.mem.size, spilled: this.mem.spilled, copies: this.journaled.size, journalBytes: this.file.journalBytes, compactionError: this.file.compactionError, ...this.file.counts, ...this.records, checkpoints: { ...this.checkpoints } };
  }

  /** Why nothing more is written to the journal (a write or sync failed) until the next start, or undefined. */
  failure(): string | undefined {
    return this.file.failed?.message;
  }

  /** Forces a compaction (tests, and a clean stop could use it). */
  compact(): void {
    this.file.compact();
  }

  /** Resolves once no compaction runs in the background (tests). */
  compacted(): Promise<void> {
    return this.file.compacted();
  }

  private closed = false;

  /** Waits for the journal's last sync; closing twice is harmless (the module and the platform both may). */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.coalesced) {
      clearInterval(this.coalesced.timer);
      // What no step is changing is written; a window still busy (a step that never finished)
      // is not: its saves fail, and the bus delivers their batches again at the next start.
      this.checkpointing = false;
      this.checkpoint(true);
      const left = [...this.dirty.values()].flatMap((d) => d.waiting);
      this.dirty.clear();
      for (const w of left) w.reject(new Error('window store closed before the window was journaled (a step was still changing it)'));
    }
    this.closed = true;
    await this.file.close();
    await this.mem.close();
  }
}

/** A coalesced save waiting for the records of its windows (`left` of them still to sync). */
interface SaveWaiter {
  left: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** One record of coalesced saves being built, and the saves that wait for it. */
interface Batch<W> {
  change: Change<W>;
  waiting: SaveWaiter[];
}

/** The saves waiting for a record: each resolved once every record it waits for is synced, all failed with it. */
function settleWith(done: Promise<void>, waiting: readonly SaveWaiter[]): void {
  if (!waiting.length) return;
  done.then(
    () => {
      for (const w of waiting) if (--w.left === 0) w.resolve();
    },
    (err: unknown) => {
      for (const w of waiting) w.reject(err);
    },
  );
}

/**
 * Saves that make a checkpoint come at the next turn instead of at its interval: the bus log
 * holds at most MAX_DEFERRED batches of a partition whose saves are not durable yet.
 */
const SAVES_PER_CHECKPOINT = 256;

/** How long a checkpoint writes before it lets the event loop go (ms). */
const CHECKPOINT_SLICE_MS = 4;

/** A record's entries at `keys`, as a layer would hold them (an own `__proto__` too: no prototype). */
function entriesAt(rec: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (Object.prototype.hasOwnProperty.call(rec, k)) out[k] = rec[k];
  }
  return out;
}
