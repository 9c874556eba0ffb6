import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { decodeFrame, encodeFrame } from '../bus/log/frame';
import { syncDir, syncDirAsync } from '../sync-dir';
import type { Edit } from './patch';

/**
 * The files behind JournalWindowStore: `<name>.snapshot` (the live windows when the journal was
 * last compacted) and `<name>.journal` (every change since), both made of the durable log's
 * CRC frames, one frame per change (one save call, whole: a crash never keeps half of one).
 *
 * A change carries a window whole (`put`) or the edits one save made to it (`patch`, see
 * patch.ts), a key deleted, a wake time. Every frame has a sequence number, increasing across
 * the snapshot and both journals; the snapshot stores beside each window the last sequence
 * number it holds (`q`), so replaying a journal over a snapshot that already holds some of its
 * changes skips those (an edit applied twice would not be the same window), which is what makes
 * compaction safe to cut short anywhere (snapshot written, fsynced, renamed into place; only
 * then the journal emptied). Journals written before edits existed hold only whole windows and
 * wakes, which read the same way.
 *
 * Compaction runs beside the saves, off the event loop's critical path: it starts a second
 * journal, `<name>.journal.next`, that takes every change from then on, and writes the snapshot
 * a few milliseconds of work at a time (it read every window and wrote and synced the whole
 * file in one turn: 150-700 ms for 10,000-50,000 windows, during which no export, pre-call
 * check or finding was served). A window changed while the snapshot is written may be in it
 * older or newer, but its change is in the second journal, which is replayed after it. Once the
 * snapshot is in place, the first journal is removed and the second renamed to its name.
 */
export interface Change<W> {
  /**
   * x: absolute expiry in ms (null: none), r: revision; q (snapshot only): the last sequence
   * number the window holds; z: 1 when the window is at rest (WindowSave.rest: read back, it
   * goes where the store keeps such windows; absent in journals written before it).
   */
  put?: { k: string; w: W; x: number | null; r: number; q?: number; z?: 1 }[];
  /** A window's edits since its previous record in the same journal (d), its expiry and revision after them. */
  patch?: { k: string; d: Edit[]; x: number | null; r: number; z?: 1 }[];
  del?: string[];
  /** at null: no wake. */
  wake?: { k: string; at: number | null }[];
}

/** A change as read back, with its frame's sequence number. */
export interface Stored<W> {
  change: Change<W>;
  seq: number;
}

const TOPIC = 'windows';
const write = promisify(fs.write);
const fdatasync = promisify(fs.fdatasync);
const fsync = promisify(fs.fsync);
const openFile = promisify(fs.open);
const closeFile = promisify(fs.close);

/** How long the snapshot is written for before the event loop is let go (ms). */
const SLICE_MS = 2;

export interface JournalFileOptions<W> {
  dir: string;
  name: string;
  /** Compact once the journal passes this many bytes (and outweighs the snapshot). */
  compactBytes: number;
  /**
   * The live state, as changes, written as the new snapshot. SNAPSHOT_WAIT: a window is not
   * ready to be read (a step is changing it): asked again a moment later.
   */
  snapshot: () => Iterable<Change<W> | typeof SNAPSHOT_WAIT>;
}

/** From the snapshot's changes: ask again in a moment (see JournalFileOptions.snapshot). */
export const SNAPSHOT_WAIT: unique symbol = Symbol('snapshot wait');

/** How long a background snapshot waits for a window a step is changing before it is put off. */
const SNAPSHOT_WAIT_MS = 10_000;

/** A compaction put off (not a failure to keep as compactionError): a later sync tries again. */
function postponed(why: string): Error {
  return Object.assign(new Error(`window compaction put off: ${why}`), { postponed: true });
}

interface Waiter {
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class JournalFile<W> {
  private readonly snapshotPath: string;
  private readonly journalPath: string;
  /** The journal begun when a compaction started (see the class comment). */
  private readonly nextPath: string;
  /** Changes go to the `.next` journal: a compaction started and has not put it in place yet. */
  private split = false;
  private compacting: Promise<void> | undefined;
  private fd = -1;
  private bytes = 0;
  /** The first journal's size while changes go to the second (see `split`). */
  private firstBytes = 0;
  private snapshotBytes = 0;
  private seq = 0;
  private pending: Buffer[] = [];
  private waiters: Waiter[] = [];
  private flushing: Promise<void> | undefined;
  /** Syncs to disk and compactions: one sync covers every change queued while the last ran. */
  readonly counts = { syncs: 0, compactions: 0, tornBytes: 0, postponed: 0 };

  constructor(private readonly opts: JournalFileOptions<W>) {
    fs.mkdirSync(opts.dir, { recursive: true });
    this.snapshotPath = path.join(opts.dir, `${opts.name}.snapshot`);
    this.journalPath = path.join(opts.dir, `${opts.name}.journal`);
    this.nextPath = `${this.journalPath}.next`;
  }

  /**
   * Every change stored, snapshot first. A damaged journal tail (a change whose save never
   * returned: it waited for the sync the crash cut) is cut off; damage in the snapshot, which
   * was synced before it was renamed into place, is corruption and stops the start.
   */
  *open(): Generator<Stored<W>> {
    fs.rmSync(`${this.snapshotPath}.tmp`, { force: true });
    if (fs.existsSync(this.snapshotPath)) {
      const buf = fs.readFileSync(this.snapshotPath);
      this.snapshotBytes = buf.length;
      const at = yield* this.frames(buf);
      if (at.damaged) throw new Error(`window snapshot ${this.snapshotPath} is damaged at byte ${at.pos} (${at.damaged}); move it aside to start without the windows it holds`);
    }
    const buf = fs.existsSync(this.journalPath) ? fs.readFileSync(this.journalPath) : Buffer.alloc(0);
    let at = yield* this.frames(buf);
    let file = this.journalPath;
    if (fs.existsSync(this.nextPath)) {
      // A compaction was cut short: the first journal was synced and closed before the second
      // was begun, so damage in it is not a torn write.
      if (at.damaged) throw new Error(`window journal ${this.journalPath} is damaged at byte ${at.pos} (${at.damaged}); move it aside to start without the changes it holds`);
      file = this.nextPath;
      this.split = true;
      this.firstBytes = at.pos;
      at = yield* this.frames(fs.readFileSync(file));
    }
    this.fd = fs.openSync(file, 'a');
    if (at.damaged) {
      this.counts.tornBytes = fs.fstatSync(this.fd).size - at.pos;
      fs.ftruncateSync(this.fd, at.pos);
      fs.fsyncSync(this.fd);
    }
    this.bytes = at.pos;
  }

  private *frames(buf: Buffer): Generator<Stored<W>, { pos: number; damaged?: string }> {
    let pos = 0;
    for (;;) {
      const r = decodeFrame(buf, pos);
      if ('end' in r) return { pos };
      if ('damaged' in r) return { pos, damaged: r.damaged };
      this.seq = Math.max(this.seq, r.frame.offset + 1);
      pos += r.size;
      yield { change: JSON.parse(Buffer.from(r.frame.value).toString('utf8')) as Change<W>, seq: r.frame.offset };
    }
  }

  private encode(change: Change<W>): Buffer {
    return encodeFrame(TOPIC, 0, this.seq++, '', Buffer.from(JSON.stringify(change)));
  }

  /**
   * Queues a change; resolves once it is on disk. Changes queued while a sync runs share the
   * next one (the rule engine's saves, wakes and the question service's, all in one sync).
   */
  append(change: Change<W>): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    this.pending.push(this.encode(change));
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length) {
      const buf = Buffer.concat(this.pending);
      const waiters = this.waiters;
      this.pending = [];
      this.waiters = [];
      let ok = false;
      if (this.failed) {
        // Queued while the write that failed was under way: encoded against changes not on disk.
        for (const w of waiters) w.reject(this.failed);
        continue;
      }
      try {
        if (this.fd < 0) throw new Error(`window journal ${this.journalPath} is closed`);
        let done = 0;
        while (done < buf.length) done += (await write(this.fd, buf, done, buf.length - done)).bytesWritten;
        await fdatasync(this.fd);
        this.bytes += buf.length;
        this.counts.syncs++;
        for (const w of waiters) w.resolve();
        ok = true;
      } catch (e) {
        // A write cut short (a full disk) must not stay in the middle of the journal: the next
        // start would stop reading there and drop the changes synced after it.
        try {
          if (this.fd >= 0) fs.ftruncateSync(this.fd, this.bytes);
        } catch {
          // the next write fails too, and says why
        }
        // And nothing more is written: a later change may be an edit of one that is not on disk
        // (a window first written in the record that failed), which the next start could not
        // read. Failed until the process starts again, as the bus log (a sync that failed may
        // also have lost pages written before it). The saves fail; the bus delivers their
        // batches again after the restart, from a journal that is a whole prefix.
        if (this.fd >= 0) {
          this.failed = new Error(`window journal ${this.journalPath} cannot be written (${(e as Error).message}); nothing more is written to it until neatroots starts again`, { cause: e });
        }
        for (const w of waiters) w.reject(e);
      }
      // Between writes: the second journal is begun here, where no write is under way.
      const journaled = this.firstBytes + this.bytes;
      if (ok && !this.compacting && journaled > this.opts.compactBytes && journaled > this.snapshotBytes) await this.startCompaction();
    }
    this.flushing = undefined;
  }

  /**
   * Begins the second journal (created and its folder synced before a change is written to
   * it), then writes the snapshot in the background. A compaction that fails (a full disk)
   * changes nothing the next start reads: the journals keep growing, the error is kept
   * (`compactionError`), and a later sync tries again.
   */
  private async startCompaction(): Promise<void> {
    if (!this.split) {
      let fd: number | undefined;
      try {
        fd = await openFile(this.nextPath, 'a');
        await syncDirAsync(this.opts.dir);
      } catch (e) {
        // Not begun: no second journal may be left for the next start to take as one.
        if (fd !== undefined) await closeFile(fd).catch(() => undefined);
        await fs.promises.rm(this.nextPath, { force: true }).catch(() => undefined);
        this.compactionError = e as Error;
        return;
      }
      const first = this.fd;
      this.fd = fd;
      this.split = true;
      this.firstBytes = this.bytes;
      this.bytes = 0;
      await closeFile(first).catch(() => undefined);
    }
    this.compacting = this.writeSnapshot()
      .then(
        () => {
          this.compactionError = undefined;
        },
        async (e: unknown) => {
          // Put off (a window mid-step, see JournalWindowStore): not an error; a later sync tries again.
          if ((e as { postponed?: boolean }).postponed) this.counts.postponed++;
          else this.compactionError = e as Error;
          await fs.promises.rm(`${this.snapshotPath}.tmp`, { force: true }).catch(() => undefined);
        },
      )
      .finally(() => {
        this.compacting = undefined;
      });
  }

  /** The snapshot, written a slice at a time, then put in place of both journals' first. */
  private async writeSnapshot(): Promise<void> {
    const tmp = `${this.snapshotPath}.tmp`;
    const fd = await openFile(tmp, 'w');
    let size = 0;
    try {
      let chunk: Buffer[] = [];
      let slice = performance.now();
      const out = async () => {
        const b = Buffer.concat(chunk);
        chunk = [];
        let done = 0;
        while (done < b.length) done += (await write(fd, b, done, b.length - done, size + done)).bytesWritten;
        size += b.length;
        slice = performance.now();
      };
      // The keys are taken at once; each window is read as it is when its turn comes.
      let waited = 0;
      for (const change of this.opts.snapshot()) {
        if (change === SNAPSHOT_WAIT) {
          // A window a step is changing: its step is done within milliseconds, or the compaction is put off.
          if ((waited += 2) > SNAPSHOT_WAIT_MS) throw postponed('a window stayed mid-step');
          await out();
          await new Promise((r) => setTimeout(r, 2));
          continue;
        }
        chunk.push(this.encode(change));
        if (performance.now() - slice > SLICE_MS) await out();
      }
      await out();
      await fsync(fd);
    } finally {
      await closeFile(fd);
    }
    await fs.promises.rename(tmp, this.snapshotPath);
    await syncDirAsync(this.opts.dir);
    // A crash from here on replays the first journal, then the second, over the new snapshot:
    // the same state.
    await fs.promises.rm(this.journalPath, { force: true });
    await fs.promises.rename(this.nextPath, this.journalPath);
    await syncDirAsync(this.opts.dir);
    this.split = false;
    this.firstBytes = 0;
    this.snapshotBytes = size;
    this.counts.compactions++;
  }

  compactionError: Error | undefined;
  /** A write or sync failed: every later change is refused with this (see flush). */
  failed: Error | undefined;

  /** Resolves once no compaction is running (tests; close). */
  async compacted(): Promise<void> {
    while (this.flushing || this.compacting) await (this.compacting ?? this.flushing);
  }

  /** Writes the live state as the new snapshot, then starts an empty journal, in one go (tests). */
  compact(): void {
    if (this.compacting) throw new Error(`window journal ${this.journalPath}: a compaction is under way`);
    const tmp = `${this.snapshotPath}.tmp`;
    const fd = fs.openSync(tmp, 'w');
    let size = 0;
    try {
      let chunk: Buffer[] = [];
      let chunkBytes = 0;
      const out = () => {
        const b = Buffer.concat(chunk);
        fs.writeSync(fd, b, 0, b.length, size);
        size += b.length;
        chunk = [];
        chunkBytes = 0;
      };
      for (const change of this.opts.snapshot()) {
        if (change === SNAPSHOT_WAIT) throw postponed('a window is mid-step');
        const f = this.encode(change);
        chunk.push(f);
        chunkBytes += f.length;
        if (chunkBytes > 1 << 20) out();
      }
      out();
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.snapshotPath);
    syncDir(this.opts.dir);
    // A crash before this line replays the old journal over the new snapshot: the same state.
    if (this.split) {
      fs.rmSync(this.journalPath, { force: true });
      fs.renameSync(this.nextPath, this.journalPath);
      syncDir(this.opts.dir);
      this.split = false;
      this.firstBytes = 0;
    }
    fs.ftruncateSync(this.fd, 0);
    fs.fsyncSync(this.fd);
    this.bytes = 0;
    this.snapshotBytes = size;
    this.counts.compactions++;
  }

  /** The sequence number of the next change appended (every change before it has a lower one). */
  get nextSeq(): number {
    return this.seq;
  }

  get journalBytes(): number {
    return this.bytes;
  }

  /** Waits for queued changes, then closes the journal (its contents stay: the next open reads them). */
  async close(): Promise<void> {
    await this.compacted();
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }
}


