import * as path from 'node:path';
import type { WindowStore } from '@neatroots/ports';
import { type Change, JournalFile } from './journal-file';
import { MemoryWindowStore } from './memory';

/**
 * Run windows that survive a crash of the embedded deployment: MemoryWindowStore (its cap and
 * spill file kept), with every change appended to a journal in the data folder and synced
 * before the call returns. The rule engine saves a batch's windows before it lets the bus
 * position move, so after a crash the windows are those saved with the last position kept, and
 * the batches after it are replayed against them: the same findings, the same ids, none twice.
 *
 * The journal is read at open (a torn last record cut off) and compacted into a snapshot once it
 * passes `compactBytes`.
 */
export interface JournalWindowStoreOptions {
  /** The folder of the journal and snapshot (the data folder's windows/). */
  dir: string;
  /** The store's name: its files are <name>.journal, <name>.snapshot, <name>.spill. */
  name: string;
  maxWindows?: number;
  compactBytes?: number;
  now?: () => number;
}

const expiry = (x: number | null) => (x === null ? Infinity : x);
const stored = (x: number) => (x === Infinity ? null : x);

export class JournalWindowStore<W> implements WindowStore<W> {
  private readonly mem: MemoryWindowStore<W>;
  private readonly file: JournalFile<W>;
  /**
   * Each change is made in memory and its record queued in the call's turn; records are
   * synced in that order (the port's appliedAtCall): the rule engine's next batch goes on
   * while the last one's save is syncing, and the bus keeps its position until it is synced.
   */
  readonly appliedAtCall = true;
  /** load hands out the windows in memory (the port's loadsStored); a save's layers are merged before its record is written. */
  readonly loadsStored = true;

  private constructor(opts: JournalWindowStoreOptions) {
    this.mem = new MemoryWindowStore<W>({
      now: opts.now,
      maxWindows: opts.maxWindows ?? Infinity,
      spillFile: path.join(opts.dir, `${opts.name}.spill`),
    });
    this.file = new JournalFile<W>({ dir: opts.dir, name: opts.name, compactBytes: opts.compactBytes ?? 64 * 1024 * 1024, snapshot: () => this.snapshot() });
  }

  /** Opens the store, reading back what the journal holds. */
  static open<W>(opts: JournalWindowStoreOptions): JournalWindowStore<W> {
    const s = new JournalWindowStore<W>(opts);
    for (const c of s.file.open()) s.apply(c);
    return s;
  }

  private apply(c: Change<W>): void {
    for (const p of c.put ?? []) this.mem.restore(p.k, p.w, expiry(p.x), p.r);
    if (c.del) this.mem.deleteNow(c.del);
    if (c.wake) this.mem.setWakesNow(c.wake.map((w) => ({ key: w.k, atMs: w.at })));
  }

  /**
   * The live state as changes, read while the store goes on changing (compaction writes it a
   * slice at a time): the keys are taken at once, each window read as it is when its turn
   * comes (a change made meanwhile is in the journal begun with the compaction, replayed after
   * the snapshot), a few windows a record so each slice stays short.
   */
  private *snapshot(): Generator<Change<W>> {
    let put: NonNullable<Change<W>['put']> = [];
    for (const key of this.mem.liveKeys()) {
      const e = this.mem.peek(key);
      if (!e) continue;
      put.push({ k: key, w: e.window, x: stored(e.expiresAt), r: e.rev });
      if (put.length >= 32) {
        yield { put };
        put = [];
      }
    }
    if (put.length) yield { put };
    const wakes = this.mem.wakeList();
    if (wakes.length) yield { wake: wakes.map((w) => ({ k: w.key, at: w.atMs })) };
  }

  async load(keys: readonly string[]): Promise<Map<string, W>> {
    return this.mem.load(keys);
  }

  // Each change is made in memory and its record queued in the same turn (records in the order
  // of the changes); the call returns once the record is synced.

  async save(entries: readonly { key: string; window: W; ttlMs?: number; expectRev?: number }[]): Promise<void> {
    if (!entries.length) return;
    this.mem.saveNow(entries);
    // The last entry of a key wins, as in memory.
    const last = new Map(entries.map((e) => [e.key, e.window]));
    await this.file.append({
      put: [...last].map(([k, w]) => {
        const st = this.mem.stateOf(k)!;
        return { k, w, x: stored(st.expiresAt), r: st.rev };
      }),
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (!keys.length) return;
    this.mem.deleteNow(keys);
    await this.file.append({ del: [...keys] });
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    if (!entries.length) return;
    this.mem.wakeAtNow(entries);
    await this.file.append({ wake: this.wakes(entries.map((e) => e.key)) });
  }

  async setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void> {
    if (!entries.length) return;
    this.mem.setWakesNow(entries);
    await this.file.append({ wake: entries.map((e) => ({ k: e.key, at: e.atMs })) });
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
    return { inMemory: this.mem.size, spilled: this.mem.spilled, journalBytes: this.file.journalBytes, compactionError: this.file.compactionError, ...this.file.counts };
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
    this.closed = true;
    await this.file.close();
    await this.mem.close();
  }
}
