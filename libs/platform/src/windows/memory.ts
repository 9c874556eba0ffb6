import { WindowConflictError, type WindowSave, type WindowStore } from '@neatroots/ports';
import { settleLayers } from './layers';
import { SpillFile } from './spill';

/**
 * Run windows in this process's memory (the embedded deployment). Returns the stored
 * objects themselves (loadsStored): what a caller changes in them is in the store at once, so a
 * caller whose step may never be saved changes a copy, or keeps what the step led to for the
 * next step (the rule engine's `unsaved`). A saved window's layers are merged as it is stored
 * (layers.ts).
 *
 * Bounded: past `maxWindows` the least recently used windows (runs that went quiet: a run that
 * never ends would otherwise stay for the whole idle TTL) are written to `spillFile` and read
 * back, unchanged, when their run speaks again. Without a spill file they are dropped instead,
 * and counted (`dropped`): their run then starts from an empty window.
 *
 * Windows saved at rest (WindowSave.rest: their run ended) are kept for their TTL, but at most
 * `maxResting` of them in memory: past it, the longest at rest go to the spill file. A fleet
 * ends runs all the time and each ended window is kept a while for late spans, so without this
 * the ended runs of the last TTL (ten minutes of a busy fleet: thousands) filled the memory.
 */
export interface MemoryWindowStoreOptions {
  now?: () => number;
  maxWindows?: number;
  spillFile?: string;
  /** Windows at rest kept in memory (needs a spill file; default: no bound of their own). */
  maxResting?: number;
}

interface Held<W> {
  key: string;
  window: W;
  expiresAt: number;
  /** Neighbours in least-recently-used order (older, newer). */
  older?: Held<W>;
  newer?: Held<W>;
}

export class MemoryWindowStore<W> implements WindowStore<W> {
  /**
   * The windows by key, each entry added once and kept while the window is in memory: a save
   * changes the entry in place and a use moves it in a list of its own (`oldest`..`newest`).
   * Moving the key to the end of the map instead (delete and set on every load and save) made
   * the map's table be rebuilt every few hundred uses, and an old table keeps what it held and
   * a pointer to the next: once one was tenured, every later table and every replaced window
   * in them survived the young collections of the thread that answers pre-call checks, until
   * a full collection.
   */
  private readonly windows = new Map<string, Held<W>>();
  /** The windows at rest in memory, longest at rest first. */
  private readonly resting = new Map<string, Held<W>>();
  private readonly maxResting: number;
  private oldest: Held<W> | undefined;
  private newest: Held<W> | undefined;
  private readonly wakes = new Map<string, number>();
  private readonly revs = new Map<string, number>();
  private readonly now: () => number;
  private readonly max: number;
  private readonly spill: SpillFile<W> | undefined;
  private lastSweep = 0;
  /** Windows moved to the spill file, read back from it, and dropped for want of room. */
  readonly counts = { spilled: 0, restored: 0, dropped: 0 };
  /** Every change is made in the call's turn (the port's appliedAtCall). */
  readonly appliedAtCall: boolean = true;
  /** load hands out the windows held, not copies (the port's loadsStored). */
  readonly loadsStored = true;

  constructor(opts: (() => number) | MemoryWindowStoreOptions = {}) {
    const o = typeof opts === 'function' ? { now: opts } : opts;
    this.now = o.now ?? Date.now;
    this.max = o.maxWindows ?? Infinity;
    this.maxResting = o.maxResting ?? Infinity;
    this.spill = o.spillFile && (this.max !== Infinity || this.maxResting !== Infinity) ? new SpillFile<W>(o.spillFile) : undefined;
  }

  async load(keys: readonly string[]): Promise<Map<string, W>> {
    const out = new Map<string, W>();
    const now = this.now();
    for (const k of keys) {
      const e = this.held(k, now);
      if (e) out.set(k, e.window);
    }
    this.evict();
    return out;
  }

  /** The window in memory (brought back from the spill file if it is there), marked as just used. */
  private held(k: string, now: number): Held<W> | undefined {
    const e = this.windows.get(k);
    if (e) {
      if (e.expiresAt <= now) return undefined;
      this.used(e);
      // In use again (a late span): not spilled while its step changes it; its save says if it rests.
      this.resting.delete(k);
      return e;
    }
    if (!this.spill?.has(k)) return undefined;
    const s = this.spill.take(k)!;
    if (s.expiresAt <= now) return undefined;
    this.revs.set(k, s.rev);
    this.counts.restored++;
    return this.add(k, s.window, s.expiresAt);
  }

  /** A window not in memory, added as the most recently used. */
  private add(key: string, window: W, expiresAt: number): Held<W> {
    const e: Held<W> = { key, window, expiresAt };
    this.windows.set(key, e);
    this.append(e);
    return e;
  }

  /** Takes a window out of memory (its neighbours forgotten, so nothing is kept through it). */
  private remove(key: string): Held<W> | undefined {
    const e = this.windows.get(key);
    if (!e) return undefined;
    this.windows.delete(key);
    this.resting.delete(key);
    this.unlink(e);
    return e;
  }

  private used(e: Held<W>): void {
    if (this.newest === e) return;
    this.unlink(e);
    this.append(e);
  }

  private append(e: Held<W>): void {
    e.older = this.newest;
    e.newer = undefined;
    if (this.newest) this.newest.newer = e;
    else this.oldest = e;
    this.newest = e;
  }

  private unlink(e: Held<W>): void {
    if (e.older) e.older.newer = e.newer;
    else this.oldest = e.newer;
    if (e.newer) e.newer.older = e.older;
    else this.newest = e.older;
    e.older = e.newer = undefined;
  }

  async save(entries: readonly WindowSave<W>[]): Promise<void> {
    this.saveNow(entries);
  }

  /**
   * save, done before it returns (or throwing WindowConflictError): JournalWindowStore writes
   * its journal record in the same turn, so records stay in the order the changes were made.
   */
  saveNow(entries: readonly WindowSave<W>[]): void {
    const now = this.now();
    const conflicts = entries.filter((e) => e.expectRev !== undefined && this.rev(e.key, now) !== e.expectRev).map((e) => e.key);
    if (conflicts.length) throw new WindowConflictError(conflicts);
    for (const e of entries) {
      const rev = (e.expectRev ?? this.rev(e.key, now)) + 1;
      this.spill?.drop(e.key);
      const expiresAt = e.ttlMs === undefined ? Infinity : now + e.ttlMs;
      const held = this.windows.get(e.key);
      settleLayers(e.window, held?.window);
      if (held) {
        held.window = e.window;
        held.expiresAt = expiresAt;
        this.used(held);
      }
      const h = held ?? this.add(e.key, e.window, expiresAt);
      this.revs.set(e.key, rev);
      // Longest at rest first: a window put to rest again goes to the end.
      this.resting.delete(e.key);
      if (e.rest) this.resting.set(e.key, h);
    }
    this.evict();
    if (now - this.lastSweep > 10_000) this.sweep(now);
  }

  private evict(): void {
    while (this.windows.size > this.max && this.oldest) this.out(this.oldest.key);
    if (!this.spill) return;
    while (this.resting.size > this.maxResting) this.out(this.resting.keys().next().value as string);
  }

  /** Moves a window out of memory: to the spill file (saying whether it was at rest), or dropped without one. */
  private out(k: string): void {
    const rest = this.resting.has(k);
    const e = this.remove(k)!;
    if (this.spill) {
      this.spill.put(k, { window: e.window, expiresAt: e.expiresAt, rev: this.revs.get(k) ?? 0 }, rest);
      this.counts.spilled++;
    } else {
      this.counts.dropped++;
      // Its wait goes with it: a wake would come round for a window that is not there.
      this.wakes.delete(k);
    }
    this.revs.delete(k);
  }

  /** Windows at rest in memory. */
  get restingCount(): number {
    return this.resting.size;
  }

  private rev(key: string, now: number): number {
    const e = this.windows.get(key);
    if (e) return e.expiresAt > now ? (this.revs.get(key) ?? 0) : 0;
    return this.spill?.peekRev(key, now) ?? 0;
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    // An expired window's wake goes with it (in memory or spilled): else the rule engine's tick
    // would take it every lease for a window that is not there.
    for (const k of this.wakes.keys()) {
      const st = this.stateOf(k);
      if (st && st.expiresAt <= now) this.wakes.delete(k);
    }
    for (const [k, e] of this.windows) {
      if (e.expiresAt <= now) {
        this.remove(k);
        this.revs.delete(k);
      }
    }
    this.spill?.sweep(now);
  }

  async delete(keys: readonly string[]): Promise<void> {
    this.deleteNow(keys);
  }

  deleteNow(keys: readonly string[]): void {
    for (const k of keys) {
      this.remove(k);
      this.wakes.delete(k);
      this.revs.delete(k);
      this.spill?.drop(k);
    }
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    this.wakeAtNow(entries);
  }

  wakeAtNow(entries: readonly { key: string; atMs: number }[]): void {
    for (const e of entries) {
      const cur = this.wakes.get(e.key);
      if (cur === undefined || e.atMs < cur) this.wakes.set(e.key, e.atMs);
    }
  }

  async setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void> {
    this.setWakesNow(entries);
  }

  setWakesNow(entries: readonly { key: string; atMs: number | null }[]): void {
    for (const e of entries) {
      if (e.atMs === null) this.wakes.delete(e.key);
      else this.wakes.set(e.key, e.atMs);
    }
  }

  async clearOrphanWakes(keys: readonly string[]): Promise<void> {
    this.clearOrphanWakesNow(keys);
  }

  /** clearOrphanWakes, done before it returns; says which keys' wakes it dropped. */
  clearOrphanWakesNow(keys: readonly string[]): string[] {
    const cleared: string[] = [];
    for (const k of keys) {
      if (!this.wakes.has(k) || this.peek(k)) continue;
      this.wakes.delete(k);
      cleared.push(k);
    }
    return cleared;
  }

  async takeDue(nowMs: number, limit: number, leaseMs?: number): Promise<string[]> {
    return this.takeDueNow(nowMs, limit, leaseMs);
  }

  takeDueNow(nowMs: number, limit: number, leaseMs?: number): string[] {
    const out: string[] = [];
    for (const [k, at] of this.wakes) {
      if (at <= nowMs) {
        out.push(k);
        if (out.length >= limit) break;
      }
    }
    for (const k of out) {
      if (leaseMs === undefined) this.wakes.delete(k);
      else this.wakes.set(k, nowMs + leaseMs);
    }
    return out;
  }

  /** A stored window's expiry and revision, wherever it is (undefined: none). */
  stateOf(key: string): { expiresAt: number; rev: number } | undefined {
    const e = this.windows.get(key);
    if (e) return { expiresAt: e.expiresAt, rev: this.revs.get(key) ?? 0 };
    return this.spill?.meta(key);
  }

  /** A key's wake time, if it has one. */
  wakeOf(key: string): number | undefined {
    return this.wakes.get(key);
  }

  /**
   * Puts a window back as it was stored (read from a journal at start): its absolute expiry
   * and revision kept, at rest if it was saved so. An expired one is left out.
   */
  restore(key: string, window: W, expiresAt: number, rev: number, rest = false): void {
    this.spill?.drop(key);
    this.remove(key);
    this.revs.delete(key);
    if (expiresAt <= this.now()) return;
    const h = this.add(key, window, expiresAt);
    if (rest) this.resting.set(key, h);
    this.revs.set(key, rev);
    this.evict();
  }

  /** Whether a window is at rest, in memory or spilled (a journal's snapshot says so of it). */
  atRest(key: string): boolean {
    return this.resting.has(key) || (!this.windows.has(key) && this.spill?.atRest(key) === true);
  }

  /** The keys of the windows in memory (least recently used first), then of those spilled. */
  liveKeys(): string[] {
    const keys: string[] = [];
    for (let e = this.oldest; e; e = e.newer) keys.push(e.key);
    if (this.spill) for (const k of this.spill.keys()) keys.push(k);
    return keys;
  }

  /** A live window as stored, wherever it is, without marking it used (a journal snapshot). */
  peek(key: string): { window: W; expiresAt: number; rev: number } | undefined {
    const now = this.now();
    const e = this.windows.get(key);
    if (e) return e.expiresAt > now ? { window: e.window, expiresAt: e.expiresAt, rev: this.revs.get(key) ?? 0 } : undefined;
    const s = this.spill?.peek(key);
    return s && s.expiresAt > now ? s : undefined;
  }

  /** Every live window, in memory or spilled (read without bringing it back), and every wake. */
  *live(): Generator<{ key: string; window: W; expiresAt: number; rev: number }> {
    const now = this.now();
    // Least recently used first, as they were added: a journal's snapshot read back keeps the order.
    for (let e = this.oldest; e; e = e.newer) if (e.expiresAt > now) yield { key: e.key, window: e.window, expiresAt: e.expiresAt, rev: this.revs.get(e.key) ?? 0 };
    if (this.spill) for (const [key, s] of this.spill.entries()) if (s.expiresAt > now) yield { key, ...s };
  }

  wakeList(): { key: string; atMs: number }[] {
    return [...this.wakes].map(([key, atMs]) => ({ key, atMs }));
  }

  /** Windows in memory. */
  get size(): number {
    return this.windows.size;
  }

  /** Windows in the spill file. */
  get spilled(): number {
    return this.spill?.count ?? 0;
  }

  async close(): Promise<void> {
    this.windows.clear();
    this.resting.clear();
    this.oldest = this.newest = undefined;
    this.wakes.clear();
    this.revs.clear();
    this.spill?.close();
  }
}
