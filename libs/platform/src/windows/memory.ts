import { WindowConflictError, type WindowStore } from '@neatroots/ports';

/**
 * Run windows in this process's memory (the embedded deployment). Returns the stored
 * objects themselves: the rule engine is their only writer and saves what it loaded.
 */
export class MemoryWindowStore<W> implements WindowStore<W> {
  private readonly windows = new Map<string, { window: W; expiresAt: number }>();
  private readonly wakes = new Map<string, number>();
  private readonly revs = new Map<string, number>();
  private lastSweep = 0;

  constructor(private readonly now: () => number = Date.now) {}

  async load(keys: readonly string[]): Promise<Map<string, W>> {
    const out = new Map<string, W>();
    const now = this.now();
    for (const k of keys) {
      const e = this.windows.get(k);
      if (e && e.expiresAt > now) out.set(k, e.window);
    }
    return out;
  }

  async save(entries: readonly { key: string; window: W; ttlMs?: number; expectRev?: number }[]): Promise<void> {
    const now = this.now();
    const conflicts = entries.filter((e) => e.expectRev !== undefined && this.rev(e.key, now) !== e.expectRev).map((e) => e.key);
    if (conflicts.length) throw new WindowConflictError(conflicts);
    for (const e of entries) {
      this.windows.set(e.key, { window: e.window, expiresAt: e.ttlMs === undefined ? Infinity : now + e.ttlMs });
      this.revs.set(e.key, (e.expectRev ?? this.rev(e.key, now)) + 1);
    }
    if (now - this.lastSweep > 10_000) this.sweep(now);
  }

  private rev(key: string, now: number): number {
    const e = this.windows.get(key);
    return e && e.expiresAt > now ? (this.revs.get(key) ?? 0) : 0;
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [k, e] of this.windows) {
      if (e.expiresAt <= now) {
        this.windows.delete(k);
        this.revs.delete(k);
      }
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const k of keys) {
      this.windows.delete(k);
      this.wakes.delete(k);
      this.revs.delete(k);
    }
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    for (const e of entries) {
      const cur = this.wakes.get(e.key);
      if (cur === undefined || e.atMs < cur) this.wakes.set(e.key, e.atMs);
    }
  }

  async setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void> {
    for (const e of entries) {
      if (e.atMs === null) this.wakes.delete(e.key);
      else this.wakes.set(e.key, e.atMs);
    }
  }

  async takeDue(nowMs: number, limit: number, leaseMs?: number): Promise<string[]> {
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

  get size(): number {
    return this.windows.size;
  }

  async close(): Promise<void> {
    this.windows.clear();
    this.wakes.clear();
    this.revs.clear();
  }
}
