import type { WindowStore } from '@neatroots/ports';

/**
 * Run windows in this process's memory (the embedded deployment). Returns the stored
 * objects themselves: the rule engine is their only writer and saves what it loaded.
 */
export class MemoryWindowStore<W> implements WindowStore<W> {
  private readonly windows = new Map<string, { window: W; expiresAt: number }>();
  private readonly wakes = new Map<string, number>();
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

  async save(entries: readonly { key: string; window: W; ttlMs?: number }[]): Promise<void> {
    const now = this.now();
    for (const e of entries) this.windows.set(e.key, { window: e.window, expiresAt: e.ttlMs === undefined ? Infinity : now + e.ttlMs });
    if (now - this.lastSweep > 10_000) this.sweep(now);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [k, e] of this.windows) if (e.expiresAt <= now) this.windows.delete(k);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const k of keys) {
      this.windows.delete(k);
      this.wakes.delete(k);
    }
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    for (const e of entries) {
      const cur = this.wakes.get(e.key);
      if (cur === undefined || e.atMs < cur) this.wakes.set(e.key, e.atMs);
    }
  }

  async takeDue(nowMs: number, limit: number): Promise<string[]> {
    const out: string[] = [];
    for (const [k, at] of this.wakes) {
      if (at <= nowMs) {
        out.push(k);
        this.wakes.delete(k);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  get size(): number {
    return this.windows.size;
  }

  async close(): Promise<void> {
    this.windows.clear();
    this.wakes.clear();
  }
}
