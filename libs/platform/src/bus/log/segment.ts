import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { decodeFrame, type Frame } from './frame';
import { syncDirAsync } from '../../sync-dir';

const read = promisify(fs.read);
const fdatasync = promisify(fs.fdatasync);
const close = promisify(fs.close);

/**
 * One file of the durable log: frames appended in order, never rewritten. An append is written
 * at once (into the page cache: it survives the process dying, not the machine); `synced` is how
 * far the file is known to be on disk (fdatasync'ed), which is what survives a power cut.
 */
export class Segment {
  /** Bytes written. */
  size: number;
  /** Bytes written and synced. */
  synced: number;
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

  /** Writes `buf` (whole frames) at the end; returns where it starts. Synchronous: a page-cache write. */
  append(buf: Buffer): number {
    const pos = this.size;
    let done = 0;
    while (done < buf.length) done += fs.writeSync(this.handle(), buf, done, buf.length - done, pos + done);
    this.size += buf.length;
    return pos;
  }

  /** Cuts the file back to `size` bytes (what a publish that failed had written past it). */
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
    const fd = this.fd;
    this.fd = undefined;
    if (fd !== undefined) await close(fd);
  }

  async remove(): Promise<void> {
    await this.close();
    await fs.promises.rm(this.file, { force: true });
  }
}


