import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Where MemoryWindowStore puts the windows it has no room for: one append-only file of JSON
 * records, with an index (key -> position) in memory. A window is read back (and its record
 * becomes garbage) when its run is loaded again; the file is rewritten with only the live
 * records once the garbage outweighs them. It is scratch space for this process: emptied on start.
 */
export interface Spilled<W> {
  window: W;
  expiresAt: number;
  rev: number;
}

interface Where {
  pos: number;
  len: number;
  expiresAt: number;
  rev: number;
  /** Spilled because it was at rest (its run ended), not for want of room. */
  rest: boolean;
}

export class SpillFile<W> {
  private fd: number;
  private size = 0;
  private garbage = 0;
  private readonly index = new Map<string, Where>();

  constructor(private readonly file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.fd = fs.openSync(file, 'w+');
  }

  get count(): number {
    return this.index.size;
  }

  get bytes(): number {
    return this.size;
  }

  has(key: string): boolean {
    return this.index.has(key);
  }

  /** Whether a window was spilled at rest. */
  atRest(key: string): boolean {
    return this.index.get(key)?.rest === true;
  }

  put(key: string, entry: Spilled<W>, rest = false): void {
    this.drop(key);
    const buf = Buffer.from(JSON.stringify(entry));
    fs.writeSync(this.fd, buf, 0, buf.length, this.size);
    this.index.set(key, { pos: this.size, len: buf.length, expiresAt: entry.expiresAt, rev: entry.rev, rest });
    this.size += buf.length;
  }

  /** Every spilled window, read without removing it (a journal snapshot). */
  *entries(): Generator<[string, Spilled<W>]> {
    for (const [key, w] of this.index) yield [key, this.read(w)];
  }

  keys(): IterableIterator<string> {
    return this.index.keys();
  }

  /** A spilled window, read without removing it. */
  peek(key: string): Spilled<W> | undefined {
    const w = this.index.get(key);
    return w && this.read(w);
  }

  private read(w: Where): Spilled<W> {
    const buf = Buffer.allocUnsafe(w.len);
    fs.readSync(this.fd, buf, 0, w.len, w.pos);
    const s = JSON.parse(buf.toString('utf8')) as Spilled<W>;
    // JSON has no Infinity: a window saved without a ttl comes back as null.
    if (s.expiresAt === null) s.expiresAt = Infinity;
    return s;
  }

  /** The window, removed from the file (it goes back to memory). */
  take(key: string): Spilled<W> | undefined {
    const w = this.index.get(key);
    if (!w) return undefined;
    const s = this.read(w);
    this.drop(key);
    return s;
  }

  /** The revision of a spilled window (without reading it back). */
  peekRev(key: string, now: number): number | undefined {
    const w = this.index.get(key);
    return w && w.expiresAt > now ? w.rev : undefined;
  }

  meta(key: string): { expiresAt: number; rev: number } | undefined {
    const w = this.index.get(key);
    return w && { expiresAt: w.expiresAt, rev: w.rev };
  }

  drop(key: string): void {
    const w = this.index.get(key);
    if (!w) return;
    this.index.delete(key);
    this.garbage += w.len;
    this.maybeCompact();
  }

  sweep(now: number): void {
    for (const [k, w] of this.index) if (w.expiresAt <= now) this.drop(k);
  }

  private maybeCompact(): void {
    if (this.garbage < 16 * 1024 * 1024 || this.garbage < this.size / 2) return;
    const tmp = `${this.file}.tmp`;
    const fd = fs.openSync(tmp, 'w+');
    let size = 0;
    for (const w of this.index.values()) {
      const buf = Buffer.allocUnsafe(w.len);
      fs.readSync(this.fd, buf, 0, w.len, w.pos);
      fs.writeSync(fd, buf, 0, w.len, size);
      w.pos = size;
      size += w.len;
    }
    fs.closeSync(this.fd);
    fs.renameSync(tmp, this.file);
    this.fd = fd;
    this.size = size;
    this.garbage = 0;
  }

  close(): void {
    fs.closeSync(this.fd);
    fs.rmSync(this.file, { force: true });
    this.index.clear();
  }
}
