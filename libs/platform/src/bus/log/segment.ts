import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { decodeFrame, type Frame } from './frame';
import { syncDirAsync } from '../../sync-dir';

const read = promisify(fs.read);
const fdatasync = promisify(fs.fdatasync);
const close = promisify(fs.close);

const writev = promisify(fs.writev);

/** Appends waiting for the end of the turn: contiguous, from `pos`. */
interface Batch {
  pos: number;
  bufs: Buffer[];
  written: Promise<void>;
}

/** Writes `bufs` one after another from `pos`, however many calls a short write takes. */
async function writeAll(fd: number, bufs: Buffer[], pos: number): Promise<void> {
  let rest = bufs;
  while (rest.length) {
    let n = (await writev(fd, rest, pos)).bytesWritten;
    pos += n;
    let i = 0;
    while (i < rest.length && n >= rest[i].length) n -= rest[i++].length;
    rest = rest.slice(i);
    if (n > 0) rest[0] = rest[0].subarray(n);
  }
}

/**
 * One file of the durable log: frames appended, never rewritten. An append is written on the
 * thread pool at the place it was given (into the page cache: it survives the process dying,
 * not the machine); `synced` is how far the file is known to be on disk (fdatasync'ed), which
 * is what survives a power cut.
 */
export class Segment {
  /** Bytes appended: written, or queued to be. */
  size: number;
  /** Bytes written and synced. */
  synced: number;
  /** The writes under way: a sync, a read or a close waits for them. */
  private readonly writing = new Set<Promise<void>>();
  /** The appends of this turn, written together after it. */
  private batch: Batch | undefined;
  /** Highest offset this segment holds per `topic\0partition`: when every group is past them, it can go. */
  readonly last = new Map<string, number>();
  private fd: number | undefined;
  /**
   * A new segment's folder, synced before its first sync counts (the file's entry survives a
   * power cut); until then, the sync under way.
   */
  private folder: string | undefined;
  private folderSync: Promise<void> | undefined;

  private constructor(
    readonly seq: number,
    readonly file: string,
    fd: number,
    size: number,
  ) {
    this.fd = fd;
    this.size = size;
    this.synced = size;
  }

  static fileName(dir: string, seq: number): string {
    return path.join(dir, `${String(seq).padStart(12, '0')}.seg`);
  }

  /**
   * A new, empty segment. Its folder is synced so the file itself survives a power cut: by its
   * first sync, which every durable append waits for, not here (this runs on the event loop
   * when a publish fills the last segment, and a folder's fsync on a busy disk took that turn).
   */
  static create(dir: string, seq: number): Segment {
    const file = Segment.fileName(dir, seq);
    const fd = fs.openSync(file, 'wx+');
    const seg = new Segment(seq, file, fd, 0);
    seg.folder = dir;
    seg.folderSync = syncDirAsync(dir).then(
      () => {
        seg.folder = undefined;
      },
      () => {
        seg.folderSync = undefined; // tried again by the first sync, which then fails with its error
      },
    );
    return seg;
  }

  /**
   * An existing segment, read through: every intact frame is handed to `onFrame`. A damaged
   * tail (a write the crash cut short) is cut off when `truncate` (the newest segment, which
   * was being written); in an older one it is reported and what follows is skipped.
   */
  static recover(
    file: string,
    seq: number,
    onFrame: (f: Frame, pos: number, size: number, seg: Segment) => void,
    truncate: boolean,
  ): { segment: Segment; damage?: string } {
    const fd = fs.openSync(file, 'r+');
    const buf = fs.readFileSync(file);
    const seg = new Segment(seq, file, fd, buf.length);
    let at = 0;
    let damage: string | undefined;
    for (;;) {
      const r = decodeFrame(buf, at);
      if ('end' in r) break;
      if ('damaged' in r) {
        damage = `${path.basename(file)} at byte ${at}: ${r.damaged}`;
        break;
      }
      onFrame(r.frame, at, r.size, seg);
      at += r.size;
    }
    if (damage && truncate) {
      fs.ftruncateSync(fd, at);
      fs.fdatasyncSync(fd);
      seg.size = seg.synced = at;
    }
    return { segment: seg, damage };
  }

  /**
   * Appends `bufs` (whole frames, `bytes` in all): returns where they start at once, and when
   * they are written. The write is a page-cache copy on the thread pool, not on the calling
   * thread. The appends of one turn of the event loop are written together, with one `writev`
   * after it (each publish its own call cost the main thread about as much as the copy it moved
   * off it); they are contiguous, so one place holds them all.
   */
  append(bufs: Buffer[], bytes: number): { pos: number; written: Promise<void> } {
    const pos = this.size;
    const fd = this.handle();
    this.size += bytes;
    let batch = this.batch;
    if (!batch) {
      const b: Batch = (batch = this.batch = { pos, bufs: [], written: undefined as unknown as Promise<void> });
      b.written = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        if (this.batch === b) this.batch = undefined;
        return writeAll(fd, b.bufs, b.pos);
      });
      this.writing.add(b.written);
      const gone = () => void this.writing.delete(b.written);
      b.written.then(gone, gone);
    }
    for (const b of bufs) batch.bufs.push(b);
    return { pos, written: batch.written };
  }

  /** Resolves once every write under way has ended, well or not. */
  async settled(): Promise<void> {
    await Promise.allSettled(this.writing);
  }

  /**
   * Cuts the file back to `size` bytes (what a publish that failed had written past it). Only
   * once its writes settled (`settled`): a write landing after the cut would leave a hole.
   */
  truncate(size: number): void {
    if (size >= this.size && fs.fstatSync(this.handle()).size <= size) return;
    fs.ftruncateSync(this.handle(), size);
    this.size = size;
    if (this.synced > size) this.synced = size;
  }

  /** Syncs what was written so far. Resolves when it is on disk. */
  async sync(): Promise<void> {
    const upTo = this.size;
    if (upTo <= this.synced) return;
    // What was appended so far is written first; a failed write fails the sync.
    await Promise.all(this.writing);
    if (this.folder !== undefined) {
      await this.folderSync;
      if (this.folder !== undefined) {
        await syncDirAsync(this.folder);
        this.folder = undefined;
      }
    }
    await fdatasync(this.handle());
    if (upTo > this.synced) this.synced = upTo;
  }

  /** The bytes [from, to) of the file (already written). */
  async read(from: number, to: number): Promise<Buffer> {
    // A record is handed out as soon as it is appended: its bytes may still be on their way.
    if (this.writing.size) await Promise.all(this.writing);
    const buf = Buffer.allocUnsafe(to - from);
    let done = 0;
    while (done < buf.length) {
      const { bytesRead } = await read(this.handle(), buf, done, buf.length - done, from + done);
      if (bytesRead === 0) throw new Error(`${this.file}: ended at byte ${from + done}, expected ${to}`);
      done += bytesRead;
    }
    return buf;
  }

  private handle(): number {
    if (this.fd === undefined) throw new Error(`${this.file} is closed`);
    return this.fd;
  }

  async close(): Promise<void> {
    await this.settled();
    const fd = this.fd;
    this.fd = undefined;
    if (fd !== undefined) await close(fd);
  }

  async remove(): Promise<void> {
    await this.close();
    await fs.promises.rm(this.file, { force: true });
  }
}


