import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { deadLetterTopic, type Bus, type BusBatch, type BusRecord, type DeadLetter, type SubscribeOptions, type Subscription, type Topic } from '@neatroots/ports';
import { encodeFrame, decodeFrame } from './log/frame';
import { readOffsets, writeOffsets, type OffsetsFile } from './log/offsets';
import { lockFolder } from '../folder-lock';
import { Segment } from './log/segment';
import { compressValue, expandValue } from './log/compress';
import { packCount, packValues, planPacks, unpackValues } from './pack';
import { partitionFor } from './partition';
import { busDeadLetterSink, guardHandler, type DeadLetterBusOptions } from './set-aside';

/**
 * The durable bus of the embedded deployment: an append-only log on local disk, with
 * MemoryBus's guarantees (a key on one partition, read in order by one consumer of a group at
 * a time, every group sees every record, offsets move only after the handler resolved) plus
 * the one that matters after a crash:
 *
 * - publish() resolves only once its records are written AND fdatasync'ed. Appends are
 *   gathered while the previous sync is in flight and synced together (group commit: one
 *   fsync per group of appends, not per record), so a busy bus pays one sync for thousands
 *   of records. The writes run on the thread pool, off the publishing thread; consumers see a
 *   record as soon as it is appended (they wait for neither the write nor the sync); a record
 *   processed and then lost to a crash was never acknowledged.
 * - Except on the topics `syncTopics` leaves out: the pipeline's own (findings a rule engine
 *   raised while processing events, say) are written and visible at once, without waiting
 *   for a sync. They need no sync of their own: a group's position is saved only after a sync
 *   that covers everything written so far, so a power cut loses at most records whose
 *   sources are then processed again, and raise them again.
 * - Each group's position is saved (offsets.json, replaced atomically) after its batches were
 *   handled, at most every `commitIntervalMs`. On start the log is read back and every group
 *   continues from its saved position: what was acknowledged and not yet processed is
 *   processed, what was processed in the last interval is processed again (the consumers are
 *   idempotent: finding ids are deterministic, storage upserts).
 * - Segments (files of up to `segmentBytes`) are deleted once every group is past them.
 *   Groups that start at new records only (fromBeginning: false, e.g. ingest's notes
 *   listener) are not saved and hold nothing back once they left; a topic no group reads
 *   does not keep its segments either (as Kafka's retention would drop them).
 * - Packs (./pack.ts): the records of one key in one publish() are written as one frame (one
 *   header, one CRC, one write), still one offset per record: positions, batches and the
 *   backlog count records as before, and a batch may end inside a pack (the rest of it comes
 *   next). Frames written before packs are read as they were.
 * - Memory: record values are kept for the consumers up to `cacheBytes`; past that they are
 *   read back from disk. The index holds one small entry per unconsumed record: bounded by
 *   the backlog, which ingest refuses to let grow past its bound (`backlog()`).
 *
 * A write that fails (disk full, I/O error) fails that publish and every later one: the bus
 * stops acknowledging rather than acknowledge what it could not store. A batch whose handler
 * keeps throwing is retried a bounded number of times, then the records that fail alone are
 * set aside on the dead-letter topic (./set-aside.ts), as on the other buses.
 */
export interface LogBusOptions extends DeadLetterBusOptions {
  /** The log's folder (created). One process at a time (a LOCK file says which). */
  dir: string;
  partitions?: number;
  maxBatch?: number;
  /** Records of one key in one publish() are written as one frame (a pack). Default true. */
  pack?: boolean;
  /** A pack's value stays within this many bytes (more records of the key: another pack). Default 1 MiB. */
  packBytes?: number;
  /** A segment is closed and a new one begun past this size. Default 64 MiB. */
  segmentBytes?: number;
  /** Record values kept in memory for the consumers. Default 64 MiB. */
  cacheBytes?: number;
  /**
   * Topics whose frames are deflated when their value (a record, or a pack) is `compressBytes`
   * or more (./log/compress.ts). Fewer bytes written and synced for a little CPU on the
   * publishing thread; the consumers take the values from the cache, and only a record read back
   * from disk is inflated. Default: none.
   */
  compress?: (topic: string) => boolean;
  /** Default 1 KiB. */
  compressBytes?: number;
  /**
   * Topics whose publish waits for the sync (what is acknowledged to the outside world: ingest's
   * events). Default: every topic.
   */
  syncTopics?: (topic: string) => boolean;
  /** How often the groups' positions are saved (and consumed segments deleted). Default 100 ms. */
  commitIntervalMs?: number;
  /**
   * A saved group with no member for this long is dropped (its position forgotten, its records
   * no longer held): a consumer group that was renamed or removed. Default 1 hour.
   */
  staleGroupMs?: number;
  /** A topic no group reads keeps this many records indexed, for a group that joins later. */
  maxUnread?: number;
  retryDelayMs?: number;
  onError?: (err: unknown, topic: string, group: string) => void;
}

/** Where a record is, and its value while it is cached. */
interface Entry {
  seg: Segment;
  /** Where its frame is, and the frame's length (a pack's records share one frame). */
  pos: number;
  len: number;
  /** Its place in a pack's values; -1: the frame is this record alone. */
  sub: number;
  /** Bytes it counts against cacheBytes while cached. */
  cost: number;
  key: string;
  value: unknown;
  cached: boolean;
}

interface Part {
  /** null: a record recovery could not read (damaged segment); reported and skipped. */
  entries: (Entry | null)[];
  /** Offset of entries[0]. */
  base: number;
  /** Records below this offset are written (visible to consumers). */
  durable: number;
}

interface Member {
  handler: (batch: BusBatch<unknown>) => Promise<void>;
  partitions: number[];
  closed: boolean;
  /** The delivery loop of each partition in hand (partitions are delivered side by side). */
  busy: Map<number, Promise<void>>;
  /** Wakes a partition's loop that waits for deferred effects when new records come. */
  poke: Map<number, () => void>;
}

interface Group {
  name: string;
  /** Saved in offsets.json and holding segments back (every group but fromBeginning: false ones). */
  durable: boolean;
  offsets: number[];
  members: Member[];
  /** When it last had a member (or was read back from disk): a group gone for good is dropped. */
  seenAt: number;
}

interface TopicState {
  name: string;
  parts: Part[];
  groups: Map<string, Group>;
}

/** What the log found on start. */
export interface LogRecovery {
  segments: number;
  /**
   * Accepted records not processed yet: of each topic whose publish waits for the sync
   * (`syncTopics`, what is acknowledged outside: the embedded deployment's events), what its
   * slowest group has not processed, as backlog() counts it (the start line says what the stop
   * line said; each group's lag, added up, counted a record once per group). They are
   * delivered now, and so is what any group has not processed of the other topics.
   */
  pending: number;
  /** Damaged places found (a torn tail is cut off; it was never acknowledged). */
  damage: string[];
}

export interface LogBusStats {
  published: number;
  /** Group commits (one fsync round each). */
  syncs: number;
  /** Time spent writing and syncing, over all group commits, and the longest one (ms). */
  syncMs: number;
  syncMaxMs: number;
  bytesWritten: number;
  /**
   * The appends (a write on the thread pool, into the page cache): their count, the time from
   * appended to written and the longest (ms).
   */
  writes: number;
  writeMs: number;
  writeMaxMs: number;
  consumed: number;
  /** Records read back from disk (not in the cache). */
  readFromDisk: number;
  segmentsDeleted: number;
  handlerErrors: number;
  decodeErrors: number;
  /** Frames written (a pack is one): against `published` records. */
  frames: number;
  /** Bytes deflating saved (compress). */
  bytesDeflated: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Nothing to do with a rejection here: whoever awaits the write has it. */
const ignore = () => undefined;
/**
 * Batches of a partition whose deferred effects may be in flight at once (the rule engine's
 * window saves, made durable at the journal's next checkpoint: up to its interval's worth).
 */
const MAX_DEFERRED = 1024;
const partKey = (topic: string, p: number) => `${topic}\0${p}`;

export class LogBus implements Bus {
  readonly recovery: LogRecovery;
  readonly stats: LogBusStats = { published: 0, syncs: 0, syncMs: 0, syncMaxMs: 0, bytesWritten: 0, writes: 0, writeMs: 0, writeMaxMs: 0, consumed: 0, readFromDisk: 0, segmentsDeleted: 0, handlerErrors: 0, decodeErrors: 0, frames: 0, bytesDeflated: 0 };

  private readonly dir: string;
  private readonly partitions: number;
  private readonly maxBatch: number;
  private readonly pack: boolean;
  private readonly packBytes: number;
  private readonly segmentBytes: number;
  private readonly cacheBytes: number;
  private readonly commitIntervalMs: number;
  private readonly maxUnread: number;
  private readonly staleGroupMs: number;
  private readonly retryDelayMs: number;
  private readonly onError: (err: unknown, topic: string, group: string) => void;
  private readonly unlock: () => void;

  private readonly topics = new Map<string, TopicState>();
  private readonly codecs = new Map<string, Topic<unknown>>();
  private segments: Segment[] = [];
  private cached = 0;

  private waiting: { resolve(): void; reject(err: unknown): void }[] = [];
  /**
   * Every append so far written: a publish resolves once its writes and all earlier ones are
   * (an acknowledged record never lies after one that failed), and is refused if any failed.
   */
  private appended: Promise<void> = Promise.resolve();
  private syncing: Promise<void> | undefined;
  private readonly syncTopics: (topic: string) => boolean;
  private readonly compress: (topic: string) => boolean;
  private readonly compressBytes: number;
  private failed: Error | undefined;

  private commitTimer: NodeJS.Timeout | undefined;
  private committing: Promise<void> | undefined;
  private offsetsDirty = false;

  /** No new deliveries (close() in progress); publishing still works for batches in hand. */
  private closing = false;
  /** Batches are handed out; false once a stop's drain time is over (stopDelivering) or close() began. */
  private delivering = true;
  private closed = false;
  /** Records set aside as dead letters. */
  setAsideCount = 0;

  constructor(private readonly opts: LogBusOptions) {
    this.dir = opts.dir;
    this.partitions = opts.partitions ?? 4;
    this.maxBatch = opts.maxBatch ?? 2000;
    this.pack = opts.pack ?? true;
    this.packBytes = Math.max(1024, opts.packBytes ?? 1024 * 1024);
    this.segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024;
    this.cacheBytes = opts.cacheBytes ?? 64 * 1024 * 1024;
    this.commitIntervalMs = opts.commitIntervalMs ?? 100;
    this.maxUnread = opts.maxUnread ?? 100_000;
    this.staleGroupMs = opts.staleGroupMs ?? 3_600_000;
    this.retryDelayMs = opts.retryDelayMs ?? 200;
    this.syncTopics = opts.syncTopics ?? (() => true);
    this.compress = opts.compress ?? (() => false);
    this.compressBytes = opts.compressBytes ?? 1024;
    this.onError = opts.onError ?? ((err, topic, group) => console.error(`bus: ${topic}/${group}: batch failed, retrying:`, err));
    fs.mkdirSync(this.dir, { recursive: true });
    this.unlock = lockFolder(this.dir, `the bus log in ${this.dir}`);
    try {
      this.recovery = this.recover();
    } catch (e) {
      this.unlock();
      throw e;
    }
  }

  // ---- recovery -------------------------------------------------------------------------

  /** Reads the segments back: every record some saved group has not processed is indexed again. */
  private recover(): LogRecovery {
    const saved = readOffsets(this.dir, this.partitions);
    for (const [topic, groups] of Object.entries(saved.groups)) {
      const t = this.topic(topic);
      for (const [name, offsets] of Object.entries(groups)) {
        t.groups.set(name, { name, durable: true, offsets: offsets.slice(), members: [], seenAt: Date.now() });
      }
    }
    const files = fs
      .readdirSync(this.dir)
      .filter((f) => /^\d{12}\.seg$/.test(f))
      .sort();
    const damage: string[] = [];
    const next = new Map<Part, number>();
    files.forEach((f, i) => {
      const seq = Number(f.slice(0, 12));
      const { segment, damage: d } = Segment.recover(
        `${this.dir}/${f}`,
        seq,
        (frame, pos, size, seg) => {
          if (frame.partition >= this.partitions) {
            damage.push(`${f}: record of ${frame.topic} on partition ${frame.partition}, beyond ${this.partitions}`);
            return;
          }
          const t = this.topic(frame.topic);
          const part = t.parts[frame.partition];
          // A pack holds `count` records, at consecutive offsets (its CRC held: its count is as written).
          const count = frame.packed ? packCount(frame.value) : 1;
          const lastOffset = frame.offset + count - 1;
          seg.last.set(partKey(frame.topic, frame.partition), lastOffset);
          next.set(part, lastOffset + 1);
          const floor = this.floor(t, frame.partition);
          for (let i = 0; i < count; i++) {
            const offset = frame.offset + i;
            if (floor !== Infinity && offset < floor) {
              part.base = offset + 1; // processed by every group: not indexed
              continue;
            }
            if (!part.entries.length) part.base = offset;
            // A gap (a damaged segment before this one): placeholders, reported when reached.
            while (part.base + part.entries.length < offset) part.entries.push(null);
            if (part.base + part.entries.length === offset) {
              part.entries.push({ seg, pos, len: size, sub: frame.packed ? i : -1, cost: size, key: frame.key, value: undefined, cached: false });
            }
          }
        },
        i === files.length - 1,
      );
      if (d) damage.push(d);
      this.segments.push(segment);
    });
    let pending = 0;
    for (const t of this.topics.values()) {
      // Each group's lag over the topic's partitions: the slowest group's counts.
      const lag = new Map<Group, number>();
      for (let p = 0; p < this.partitions; p++) {
        const part = t.parts[p];
        // A partition whose records were all deleted continues after the groups' positions.
        let groupMax = 0;
        for (const g of t.groups.values()) groupMax = Math.max(groupMax, g.offsets[p] ?? 0);
        if (!part.entries.length) part.base = Math.max(part.base, next.get(part) ?? 0, groupMax);
        part.durable = part.base + part.entries.length;
        for (const g of t.groups.values()) {
          g.offsets[p] = Math.max(g.offsets[p] ?? 0, part.base);
          lag.set(g, (lag.get(g) ?? 0) + Math.max(0, part.durable - g.offsets[p]));
        }
        this.trim(t, p);
      }
      if (this.syncTopics(t.name)) pending += Math.max(0, ...lag.values());
    }
    if (!this.segments.length) this.segments.push(Segment.create(this.dir, 1));
    return { segments: files.length, pending, damage };
  }

  /** The lowest position of the groups that hold records back (Infinity: none does). */
  private floor(t: TopicState, p: number): number {
    let min = Infinity;
    for (const g of t.groups.values()) if (g.durable || g.members.length) min = Math.min(min, g.offsets[p] ?? 0);
    return min;
  }

  private topic(name: string): TopicState {
    let t = this.topics.get(name);
    if (!t) {
      t = { name, parts: Array.from({ length: this.partitions }, () => ({ entries: [], base: 0, durable: 0 })), groups: new Map() };
      this.topics.set(name, t);
    }
    return t;
  }

  /**
   * Why nothing more can be written (a write or sync that failed: a full or failing disk), until
   * the process starts again and reads the log back; undefined while it can.
   */
  failure(): string | undefined {
    return this.failed && `the bus log cannot be written (${this.failed.message})`;
  }

  // ---- publishing -----------------------------------------------------------------------

  async publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (this.closed) throw new Error('bus is closed');
    if (this.failed) throw new Error(this.failure(), { cause: this.failed });
    if (!records.length) return;
    this.codecs.set(topic.name, topic as Topic<unknown>);
    // Encoded first: a value that cannot be encoded is the caller's error, and nothing is appended.
    const values = records.map((r) => topic.encode(r.value));
    const t = this.topic(topic.name);
    // The partitions this publish adds to, and where its records start in each.
    const touched = new Map<Part, { p: number; from: number }>();
    const compress = this.compress(topic.name);
    // Frames are gathered per segment and written with one call each.
    let seg = this.segments[this.segments.length - 1];
    let frames: Buffer[] = [];
    let bytes = 0;
    // Where each segment this publish writes to ended before it. A write that fails (a full disk)
    // cuts each back to there, so the refused publish leaves no record for the next start to read
    // (frames written to an earlier segment, or whole frames before the one cut short).
    const starts = new Map<Segment, number>([[seg, seg.size]]);
    // The writes of this publish (appended, perhaps still under way).
    const writes: Promise<void>[] = [];
    // A failed publish: no later one appends anything, its records leave the index, and once
    // every write under way has ended (one landing after the cut would leave a hole) each
    // segment is cut back.
    const fail = async (err: unknown): Promise<Error> => {
      this.failed ??= err as Error;
      this.unindex(t, touched);
      this.wakeAll();
      await Promise.all(this.segments.map((s) => s.settled()));
      for (const [s, size] of starts) {
        try {
          s.truncate(size);
        } catch {
          // Left as it is: the next start cuts a torn frame and reads the whole ones.
        }
      }
      return new Error(this.failure(), { cause: err });
    };
    const write = () => {
      if (!frames.length) return;
      const n = bytes;
      const { written } = seg.append(frames, bytes);
      const queued = performance.now();
      const counted = written.then(() => {
        const ms = performance.now() - queued;
        this.stats.writes++;
        this.stats.writeMs += ms;
        if (ms > this.stats.writeMaxMs) this.stats.writeMaxMs = ms;
        this.stats.bytesWritten += n;
      });
      // Awaited through `mine` below; a publish refused before that (its next segment cannot
      // be made) leaves it to no one.
      counted.catch(ignore);
      writes.push(counted);
      frames = [];
      bytes = 0;
    };
    const plan = this.pack
      ? planPacks(records.map((r) => r.key), values.map((v) => v.byteLength), this.packBytes)
      : records.map((r, i) => ({ key: r.key, indexes: [i] }));
    for (const { key, indexes } of plan) {
      const p = partitionFor(key, this.partitions);
      const part = t.parts[p];
      const offset = part.base + part.entries.length;
      const packed = indexes.length > 1;
      const value = packed ? packValues(indexes.map((i) => values[i])) : values[indexes[0]];
      const deflated = compress && value.byteLength >= this.compressBytes ? compressValue(value, packed) : undefined;
      const frame = encodeFrame(topic.name, p, offset, key, deflated ?? value, packed, deflated !== undefined);
      if (deflated) this.stats.bytesDeflated += value.byteLength - deflated.byteLength;
      if (seg.size + bytes > 0 && seg.size + bytes + frame.length > this.segmentBytes) {
        write();
        try {
          seg = Segment.create(this.dir, seg.seq + 1);
        } catch (err) {
          throw await fail(err);
        }
        this.segments.push(seg);
        starts.set(seg, 0);
      }
      const pos = seg.size + bytes;
      frames.push(frame);
      bytes += frame.length;
      this.stats.frames++;
      seg.last.set(partKey(topic.name, p), offset + indexes.length - 1);
      for (let j = 0; j < indexes.length; j++) {
        const cost = packed ? values[indexes[j]].byteLength + 16 : frame.length;
        const cached = this.cached + cost <= this.cacheBytes;
        if (cached) this.cached += cost;
        part.entries.push({ seg, pos, len: frame.length, sub: packed ? j : -1, cost, key, value: cached ? records[indexes[j]].value : undefined, cached });
      }
      if (!touched.has(part)) touched.set(part, { p, from: offset });
    }
    try {
      write();
    } catch (err) {
      throw await fail(err);
    }
    // Resolved once this publish's writes and every earlier one's are; rejected if any failed.
    const mine = Promise.all([this.appended, ...writes]).then(() => undefined);
    mine.catch(ignore);
    this.appended = mine;
    this.stats.published += records.length;
    // Visible to the consumers at once, while the writes and the sync run (a value not in the
    // cache is read once its segment's writes ended): processing a record whose write or sync
    // then fails does no harm (it was not acknowledged: the client sends it again, and the same
    // findings come out), and the consumers do not wait for the disk.
    for (const part of touched.keys()) part.durable = part.base + part.entries.length;
    this.pumpAll();
    try {
      await mine;
    } catch (err) {
      throw await fail(err);
    }
    if (this.syncTopics(topic.name)) await this.sync();
  }

  /**
   * Takes a refused publish's records (and any after them) out of the index: they were cut off
   * the log, so they are neither counted as waiting nor handed out again. A group that was
   * handed some of them already is set back to where they began.
   */
  private unindex(t: TopicState, touched: Map<Part, { p: number; from: number }>): void {
    for (const [part, { p, from }] of touched) {
      const at = Math.max(from, part.base);
      for (const e of part.entries.splice(at - part.base)) if (e?.cached) this.cached -= e.cost;
      if (part.durable > at) part.durable = at;
      for (const g of t.groups.values()) if (g.offsets[p] > at) g.offsets[p] = at;
    }
  }

  /** Resolves once everything written so far is synced. */
  private sync(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.kickSync();
    });
  }

  private kickSync(): void {
    if (this.syncing) return;
    this.syncing = this.syncLoop().finally(() => {
      this.syncing = undefined;
      if (this.waiting.length) this.kickSync();
    });
  }

  /** Group commit: everything written while the last sync ran is synced at once. */
  private async syncLoop(): Promise<void> {
    while (this.waiting.length) {
      const waiters = this.waiting;
      this.waiting = [];
      const segs = this.segments.filter((s) => s.size > s.synced);
      const started = performance.now();
      try {
        if (this.failed) throw this.failed;
        await Promise.all(segs.map((s) => s.sync()));
      } catch (err) {
        this.failed ??= err as Error;
        this.wakeAll();
        for (const w of waiters) w.reject(new Error(`the bus log cannot be synced (${(err as Error).message})`, { cause: err }));
        continue;
      }
      this.stats.syncs++;
      const ms = performance.now() - started;
      this.stats.syncMs += ms;
      if (ms > this.stats.syncMaxMs) this.stats.syncMaxMs = ms;
      for (const w of waiters) w.resolve();
      this.pumpAll();
    }
  }

  private pumpAll(): void {
    for (const [name, t] of this.topics) for (const g of t.groups.values()) this.pump(name, t, g);
  }

  // ---- consuming ------------------------------------------------------------------------

  async subscribe<T>(topic: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    if (this.closed || this.closing) throw new Error('bus is closed');
    this.codecs.set(topic.name, topic as Topic<unknown>);
    const t = this.topic(topic.name);
    let g = t.groups.get(opts.group);
    if (!g) {
      const fromBeginning = opts.fromBeginning ?? true;
      g = {
        name: opts.group,
        durable: fromBeginning,
        seenAt: Date.now(),
        offsets: t.parts.map((part) => (fromBeginning ? part.base : part.base + part.entries.length)),
        members: [],
      };
      t.groups.set(opts.group, g);
      if (g.durable) this.scheduleCommit();
    }
    const member: Member = { handler: async () => undefined, partitions: [], closed: false, busy: new Map(), poke: new Map() };
    member.handler = guardHandler(
      this,
      handler as Member['handler'],
      { topic: topic.name, group: opts.group, stopping: () => member.closed || !this.delivering, onError: (err) => this.onError(err, topic.name, opts.group) },
      { ...this.opts, counted: () => this.setAsideCount++ },
    );
    g.members.push(member);
    this.assign(g);
    const group = g;
    this.pump(topic.name, t, group);
    return {
      close: async () => {
        member.closed = true;
        // A loop waiting for deferred effects or new records sees at once that it is to end.
        for (const wake of [...member.poke.values()]) wake();
        await Promise.all(member.busy.values());
        group.members = group.members.filter((m) => m !== member);
        group.seenAt = Date.now();
        if (!group.durable && !group.members.length) t.groups.delete(group.name);
        this.assign(group);
        this.pump(topic.name, t, group);
        this.scheduleCommit();
      },
    };
  }

  /**
   * Round-robin partition assignment, as a rebalance would. A member that lost a partition ends
   * its loop there once the batch in hand is handled and its deferred effects settled (see
   * drain); the new owner's loop starts only then (see pump).
   */
  private assign(g: Group): void {
    for (const m of g.members) m.partitions = [];
    if (g.members.length) for (let p = 0; p < this.partitions; p++) g.members[p % g.members.length].partitions.push(p);
    // A loop waiting for deferred effects or new records on a partition it lost sees it at once.
    for (const m of g.members) for (const wake of [...m.poke.values()]) wake();
  }

  /** Wakes every waiting delivery loop (deliveries stopped, or the log failed: see drain's settle). */
  private wakeAll(): void {
    for (const t of this.topics.values()) for (const g of t.groups.values()) for (const m of g.members) for (const wake of [...m.poke.values()]) wake();
  }

  private pump(name: string, t: TopicState, g: Group): void {
    if (!this.delivering) return;
    for (const m of g.members) {
      if (m.closed) continue;
      for (const p of m.partitions) {
        if (m.busy.has(p)) {
          m.poke.get(p)?.();
          continue;
        }
        // A partition just taken over: the member that had it may still be handling a batch of it
        // (or waiting for its deferred effects). Its loop ends first, so no record is handed to
        // two members at once, and this one starts where that one left the position.
        const before: Promise<void>[] = [];
        for (const o of g.members) {
          const busy = o !== m ? o.busy.get(p) : undefined;
          if (busy) before.push(busy);
        }
        const loop = before.length ? this.takeOver(before, name, t, g, m, p) : this.drain(name, t, g, m, p);
        m.busy.set(p, loop.finally(() => m.busy.delete(p)));
      }
    }
  }

  /**
   * Drains a partition once the loops of the members that had it ended; not at all if it is
   * let go meanwhile (this member closes, it goes on to another, deliveries stop): a member
   * that closes does not wait for another's loop.
   */
  private async takeOver(before: Promise<void>[], name: string, t: TopicState, g: Group, m: Member, p: number): Promise<void> {
    let ended = false;
    const prior = Promise.allSettled(before).then(() => void (ended = true));
    while (!ended) {
      if (m.closed || !this.delivering || !m.partitions.includes(p)) return;
      await new Promise<void>((r) => {
        m.poke.set(p, r);
        void prior.then(r);
      });
      m.poke.delete(p);
    }
    return this.drain(name, t, g, m, p);
  }

  /**
   * One partition's delivery loop. Each partition has its own, so a batch waiting on its
   * handler (a rule-engine step waiting for its findings to be synced) does not hold up the
   * other partitions; their appends share the next group commit.
   *
   * A handler may defer its last effects (BusBatch.defer: window saves still syncing): the next
   * batch is delivered at once, and the group's position (what is saved, trimmed, counted as
   * the backlog) moves past a batch only once its deferred effects and those of every batch
   * before it resolved. One that rejects sends the partition back to the saved position once
   * everything in flight settled: those batches are delivered again (handlers are idempotent).
   *
   * A loop that lets its partition go (its member closes, deliveries stop, the partition went
   * to another member) waits for the deferred effects in flight, so the position moves past
   * what they stored; but not for those that cannot move it any more, which may never settle:
   * after a batch of the partition failed (the batches before it are delivered again whatever
   * their effects do), or once the log failed (no position is saved again). The rule engine's
   * window save of a run whose later step could not publish waits for a step on that run that
   * no longer comes: a stop waited for it forever. Such effects are let go and the position
   * stays before their batches: those records stay in the log for the next start (or the
   * partition's next owner, which reads them again).
   */
  private async drain(name: string, t: TopicState, g: Group, m: Member, p: number): Promise<void> {
    // Yield once so a publisher's burst is delivered as one batch.
    await new Promise<void>((r) => setImmediate(r));
    // Where the next batch starts: ahead of g.offsets[p] while deferred effects are in flight.
    let next = g.offsets[p];
    // The deferred effects in flight, in order (each settles after the one before it).
    let tail: Promise<void> | undefined;
    let inFlight = 0;
    let failed: { err: unknown } | undefined;
    // The effects in flight were let go (see above): whatever they do later moves nothing.
    let letGo = false;
    const leaving = () => m.closed || !this.delivering || !m.partitions.includes(p);
    /** Waits for the effects in flight; false: let go instead (they cannot move the position). */
    const settle = async (): Promise<boolean> => {
      while (tail) {
        if (leaving() && (failed || this.failed)) {
          letGo = true;
          return false;
        }
        // Woken when they settle, or when the partition is let go (pump, assign, wakeAll).
        await new Promise<void>((r) => {
          m.poke.set(p, r);
          void tail!.then(r);
        });
        m.poke.delete(p);
      }
      return true;
    };
    for (;;) {
      if (failed) {
        const settled = await settle();
        this.stats.handlerErrors++;
        this.onError(failed.err, name, g.name);
        if (!settled) return;
        failed = undefined;
        next = g.offsets[p];
        await sleep(this.retryDelayMs);
        continue;
      }
      if (leaving()) {
        // Given back meanwhile (a member that joined left again): it goes on.
        if ((await settle()) && !leaving()) continue;
        return;
      }
      const part = t.parts[p];
      const from = Math.max(next, g.offsets[p], part.base);
      const to = Math.min(part.durable, from + this.maxBatch);
      if (from >= to || inFlight >= MAX_DEFERRED) {
        if (!tail) return;
        // Nothing to read yet (or enough in flight): wait for the effects or for new records.
        await new Promise<void>((r) => {
          m.poke.set(p, r);
          void tail!.then(r);
        });
        m.poke.delete(p);
        continue;
      }
      let records: BusRecord<unknown>[];
      const deferred: Promise<void>[] = [];
      try {
        const read = await this.read(t, part, from, to, g.name);
        records = read.records;
        const batch: BusBatch<unknown> = { topic: name, partition: p, records, heartbeat: async () => undefined, defer: (stored) => void deferred.push(stored) };
        if (records.length) await m.handler(batch);
        // Kept before the position moves past them (if this fails, the batch is read again).
        const dl = deadLetterTopic(this.opts.deadLetterPrefix);
        if (read.undecodable.length && name !== dl.name) {
          await busDeadLetterSink(this, dl).setAside(read.undecodable);
          this.setAsideCount += read.undecodable.length;
        }
      } catch (err) {
        // Deferred effects of a try that failed are let go (the batch is read again).
        for (const d of deferred) d.catch(() => undefined);
        if (tail) {
          // Batches before it are in flight: the partition goes back once they settled.
          failed = { err };
          continue;
        }
        this.stats.handlerErrors++;
        this.onError(err, name, g.name);
        await sleep(this.retryDelayMs);
        continue;
      }
      next = to;
      const advance = () => {
        // Its effects were let go: the position stays (a new owner may read from it already).
        // A partition reassigned meanwhile still moves: its new owner starts once this loop ended.
        if (letGo) return;
        g.offsets[p] = to;
        this.stats.consumed += records.length;
        this.trim(t, p);
        if (g.durable) this.scheduleCommit();
      };
      if (!deferred.length && !tail) {
        advance();
        continue;
      }
      inFlight++;
      const before = tail ?? Promise.resolve();
      const mine: Promise<void> = before
        .then(() => Promise.all(deferred))
        .then(
          () => {
            if (!failed) advance();
          },
          (err) => {
            failed ??= { err };
          },
        )
        .finally(() => {
          inFlight--;
          if (tail === mine) tail = undefined;
        });
      tail = mine;
    }
  }

  /**
   * Records [from, to) of a partition: from the cache, or read back from their segments. A
   * value no reader of this version understands would block the partition forever: it is
   * returned as a dead letter (its bytes in base64) instead, on its own (the rest of its pack
   * is read).
   */
  private async read(t: TopicState, part: Part, from: number, to: number, group: string): Promise<{ records: BusRecord<unknown>[]; undecodable: DeadLetter[] }> {
    const out: (BusRecord<unknown> | undefined)[] = new Array(to - from);
    const undecodable: DeadLetter[] = [];
    const fromDisk: { i: number; e: Entry }[] = [];
    for (let o = from; o < to; o++) {
      const e = part.entries[o - part.base];
      if (!e) {
        this.onError(new Error(`offset ${o}: lost to a damaged segment, skipped`), t.name, group);
        continue;
      }
      if (e.cached) out[o - from] = { key: e.key, value: e.value };
      else fromDisk.push({ i: o - from, e });
    }
    if (fromDisk.length) {
      const codec = this.codecs.get(t.name);
      if (!codec) throw new Error(`no codec for ${t.name} (subscribe names it)`);
      // One read per run of records in the same segment (a partition's records are
      // interleaved with others', so a run is read whole up to 8 MiB).
      for (let i = 0; i < fromDisk.length; ) {
        const seg = fromDisk[i].e.seg;
        let j = i + 1;
        while (j < fromDisk.length && fromDisk[j].e.seg === seg && fromDisk[j].e.pos + fromDisk[j].e.len - fromDisk[i].e.pos <= 8 * 1024 * 1024) j++;
        const start = fromDisk[i].e.pos;
        const buf = await seg.read(start, fromDisk[j - 1].e.pos + fromDisk[j - 1].e.len);
        // A pack's records share its frame: decoded and unpacked once.
        let framePos = -1;
        let frame: { key: string; value: Uint8Array } | undefined;
        let items: Uint8Array[] | undefined;
        // A value that does not inflate (its CRC held: written so by a bug, not the disk).
        let damaged: string | undefined;
        for (let k = i; k < j; k++) {
          const { i: at, e } = fromDisk[k];
          if (e.pos !== framePos) {
            const r = decodeFrame(buf, e.pos - start);
            if (!('frame' in r)) throw new Error(`${seg.file} at byte ${e.pos}: ${'damaged' in r ? r.damaged : 'no frame'}`);
            framePos = e.pos;
            frame = r.frame;
            items = undefined;
            damaged = undefined;
            if (r.frame.compressed) {
              try {
                frame = { key: r.frame.key, value: expandValue(r.frame.value, r.frame.packed) };
              } catch (err) {
                damaged = `damaged compressed value: ${(err as Error).message}`;
                this.onError(new Error(`${seg.file} at byte ${e.pos}: ${damaged}`), t.name, group);
              }
            }
            if (r.frame.packed && !damaged) {
              try {
                items = unpackValues(frame.value);
              } catch (err) {
                damaged = 'damaged pack';
                this.onError(new Error(`${seg.file} at byte ${e.pos}: damaged pack: ${(err as Error).message}`), t.name, group);
              }
            }
          }
          const bytes = damaged ? undefined : e.sub < 0 ? frame!.value : items![e.sub];
          if (!bytes) {
            undecodable.push(this.letter(t.name, group, e.key, from + at, frame!.value, new Error(damaged ?? 'damaged pack')));
            continue;
          }
          try {
            out[at] = { key: e.key, value: codec.decode(bytes) };
          } catch (err) {
            this.stats.decodeErrors++;
            this.onError(new Error(`offset ${from + at}: cannot decode, set aside: ${(err as Error).message}`), t.name, group);
            undecodable.push(this.letter(t.name, group, e.key, from + at, bytes, err));
          }
        }
        this.stats.readFromDisk += j - i;
        i = j;
      }
    }
    return { records: out.filter((r): r is BusRecord<unknown> => r !== undefined), undecodable };
  }

  private letter(topic: string, group: string, key: string, offset: number, bytes: Uint8Array, err: unknown): DeadLetter {
    return {
      project: '',
      source: `bus:${topic}/${group}`,
      kind: 'undecodable',
      ...(key ? { run_id: key } : {}),
      item_id: `offset ${offset}`,
      reason: `cannot decode: ${(err as Error).message}`,
      payload: { offset, base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64') },
    };
  }

  /** Drops index entries every holding group is past (and, for a topic nobody holds, beyond maxUnread). */
  private trim(t: TopicState, p: number): void {
    const part = t.parts[p];
    const floor = this.floor(t, p);
    const durableLen = part.durable - part.base;
    const drop = floor === Infinity ? Math.max(0, durableLen - this.maxUnread) : Math.min(floor - part.base, durableLen);
    if (drop <= 0) return;
    if (drop > 1024 || drop === part.entries.length) {
      const gone = part.entries.splice(0, drop);
      for (const e of gone) if (e?.cached) this.cached -= e.cost;
      part.base += drop;
    } else {
      // Small drops: only the cache is released now; the entries go with the next large drop.
      for (let i = 0; i < drop; i++) {
        const e = part.entries[i];
        if (e?.cached) {
          this.cached -= e.cost;
          e.cached = false;
          e.value = undefined;
        }
      }
    }
  }

  // ---- positions and segments -------------------------------------------------------------

  private scheduleCommit(): void {
    this.offsetsDirty = true;
    if (this.commitTimer || this.committing) return;
    this.commitTimer = setTimeout(() => {
      this.commitTimer = undefined;
      void this.commit();
    }, this.commitIntervalMs);
    this.commitTimer.unref();
  }

  /** Saves the durable groups' positions, then deletes the segments every group is past. */
  private commit(): Promise<void> {
    if (this.committing) return this.committing;
    this.committing = (async () => {
      try {
        while (this.offsetsDirty) {
          this.offsetsDirty = false;
          const saved: OffsetsFile = { version: 1, partitions: this.partitions, groups: {} };
          for (const [name, t] of this.topics) {
            for (const g of [...t.groups.values()]) {
              if (!g.members.length && Date.now() - g.seenAt > this.staleGroupMs) {
                t.groups.delete(g.name);
                this.onError(new Error(`group ${g.name} had no consumer for ${Math.round(this.staleGroupMs / 60_000)} min: its position is dropped`), name, g.name);
                continue;
              }
              if (g.durable) (saved.groups[name] ??= {})[g.name] = g.offsets.slice();
            }
          }
          // Everything the groups' handlers wrote (what processing raised) is on disk before the
          // positions that say it was processed.
          await this.sync();
          await writeOffsets(this.dir, saved);
          await this.deleteConsumed(saved);
        }
      } catch (err) {
        this.onError(new Error(`saving consumer positions failed (retried): ${(err as Error).message}`, { cause: err }), '(log)', '(offsets)');
        this.offsetsDirty = true;
      } finally {
        this.committing = undefined;
      }
      if (this.offsetsDirty && !this.closed) this.scheduleCommit();
    })();
    return this.committing;
  }

  /** A closed segment goes when, for each partition in it, every group's SAVED position is past its records. */
  private async deleteConsumed(saved: OffsetsFile): Promise<void> {
    const keep: Segment[] = [];
    const last = this.segments.length - 1;
    for (let i = 0; i < this.segments.length; i++) {
      const seg = this.segments[i];
      let consumed = i < last;
      if (consumed) {
        for (const [key, lastOffset] of seg.last) {
          const [topic, p] = key.split('\0');
          const t = this.topics.get(topic);
          if (!t) continue;
          let floor = Infinity;
          for (const g of t.groups.values()) {
            if (g.durable) floor = Math.min(floor, saved.groups[topic]?.[g.name]?.[Number(p)] ?? 0);
            else if (g.members.length) floor = Math.min(floor, g.offsets[Number(p)]);
          }
          if (lastOffset >= floor) {
            consumed = false;
            break;
          }
        }
      }
      if (!consumed) {
        keep.push(seg);
        continue;
      }
      // Index entries still pointing here (a topic nobody holds) go with it.
      for (const [key, lastOffset] of seg.last) {
        const [topic, p] = key.split('\0');
        const part = this.topics.get(topic)?.parts[Number(p)];
        if (!part) continue;
        const drop = Math.min(lastOffset + 1 - part.base, part.entries.length);
        if (drop > 0) {
          for (const e of part.entries.splice(0, drop)) if (e?.cached) this.cached -= e.cost;
          part.base += drop;
        }
      }
      await seg.remove();
      this.stats.segmentsDeleted++;
    }
    this.segments = keep;
  }

  // ---- state and lifecycle --------------------------------------------------------------

  /** Records published to `topic` that its slowest holding group has not processed yet. */
  backlog(topic: string): number {
    const t = this.topics.get(topic);
    if (!t) return 0;
    let max = 0;
    for (const g of t.groups.values()) {
      // Only groups reading now: one without members (stopped, or renamed by an upgrade) must
      // not make ingest refuse everything.
      if (!g.members.length) continue;
      let lag = 0;
      // Up to what was written: the entries of a publish whose write failed are not records.
      for (let p = 0; p < this.partitions; p++) lag += t.parts[p].durable - g.offsets[p];
      if (lag > max) max = lag;
    }
    return max;
  }

  /** Bytes of record values held in memory for the consumers. */
  get cachedBytes(): number {
    return this.cached;
  }

  /** Resolves when every group with members has consumed everything published so far, or once deliveries stop. */
  async idle(): Promise<void> {
    for (;;) {
      if (!this.delivering) return;
      let pending = false;
      if (this.syncing || this.waiting.length) pending = true;
      for (const [name, t] of this.topics) {
        for (const g of t.groups.values()) {
          if (g.members.some((m) => m.busy.size)) pending = true;
          else if (g.members.length && t.parts.some((part, p) => part.base + part.entries.length > g.offsets[p])) {
            pending = true;
            this.pump(name, t, g);
          }
        }
      }
      if (!pending) return;
      await sleep(1);
    }
  }

  /**
   * Hands out no more batches and waits for those in hand (a stop whose drain time is over):
   * what is left stays in the log for the next start, and backlog() says how much. Publishing
   * goes on (the stopping services may still publish; that is kept for the next start too).
   * Their deferred effects are waited for too, except those that can no longer move a position
   * (after the log failed, or behind a batch that failed: see drain), which may never settle.
   */
  async stopDelivering(): Promise<void> {
    this.delivering = false;
    this.wakeAll();
    for (const t of this.topics.values()) {
      for (const g of t.groups.values()) await Promise.all(g.members.flatMap((m) => [...m.busy.values()]));
    }
  }

  /**
   * Stops delivering, waits for the batches in hand (their handlers may still publish),
   * syncs what was published, saves the positions. What was not processed stays in the log
   * for the next start.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closing = true;
    if (this.commitTimer) clearTimeout(this.commitTimer);
    this.commitTimer = undefined;
    await this.stopDelivering();
    await this.sync().catch((err) => this.onError(err, '(log)', '(close)'));
    this.closed = true;
    this.offsetsDirty = true;
    await this.committing;
    await this.commit();
    for (const s of this.segments) await s.close();
    this.unlock();
  }
}
