import type { Bus, BusBatch, BusRecord, SubscribeOptions, Subscription, Topic } from '@neatroots/ports';
import { partitionFor } from './partition';
import { guardHandler, type DeadLetterBusOptions } from './set-aside';

/**
 * The in-process bus of the embedded deployment. It keeps Kafka's guarantees that the
 * pipeline relies on: a key always lands on the same partition, a partition is read in
 * order by one consumer of a group at a time, every group sees every record, and a
 * group's offset moves only after its handler resolved (a failing batch is retried).
 * Records are passed by reference (no encoding): consumers must not mutate them.
 * Publishing waits while the slowest group lags more than `maxLag` records: back-pressure
 * reaches the gRPC client instead of memory growing without bound. A batch whose handler
 * keeps throwing is retried a bounded number of times, then the records that fail alone are
 * set aside on the dead-letter topic (./set-aside.ts).
 */
export interface MemoryBusOptions extends DeadLetterBusOptions {
  partitions?: number;
  maxBatch?: number;
  maxLag?: number;
  retryDelayMs?: number;
  /**
   * Wait for the end of the event loop's turn before reading a batch (default true), so that
   * publishes made in separate callbacks of one turn go out together. False for a publisher
   * that waits for each record to be consumed (replay): there is nothing to gather, and a turn
   * of the loop per record costs more than the record.
   */
  gatherTurn?: boolean;
  onError?: (err: unknown, topic: string, group: string) => void;
}

interface Log {
  records: BusRecord<unknown>[];
  /** Offset of records[0]. */
  base: number;
}

interface Member {
  handler: (batch: BusBatch<unknown>) => Promise<void>;
  partitions: number[];
  closed: boolean;
  busy: Promise<void> | undefined;
}

interface Group {
  name: string;
  offsets: number[];
  members: Member[];
}

interface TopicState {
  name: string;
  logs: Log[];
  groups: Map<string, Group>;
  /**
   * The same groups as a list (a group is never removed): publish, trim and idle() walk them
   * for every record replay publishes, and a Map's iterator is an allocation each time.
   */
  groupList: Group[];
  waiters: (() => void)[];
}

const DONE: Promise<void> = Promise.resolve();
const noHeartbeat = (): Promise<void> => DONE;
const isBusy = (m: Member): boolean => m.busy !== undefined;

export class MemoryBus implements Bus {
  private readonly topics = new Map<string, TopicState>();
  /** The same topics as a list (idle() walks them after every replayed item that asked a question). */
  private readonly topicList: TopicState[] = [];
  private readonly partitions: number;
  private readonly maxBatch: number;
  private readonly maxLag: number;
  private readonly retryDelayMs: number;
  private readonly gatherTurn: boolean;
  private readonly onError: (err: unknown, topic: string, group: string) => void;
  private closed = false;
  /** Records set aside as dead letters. */
  setAsideCount = 0;

  constructor(private readonly opts: MemoryBusOptions = {}) {
    this.partitions = opts.partitions ?? 4;
    this.maxBatch = opts.maxBatch ?? 2000;
    this.maxLag = opts.maxLag ?? 200_000;
    this.retryDelayMs = opts.retryDelayMs ?? 200;
    this.gatherTurn = opts.gatherTurn ?? true;
    this.onError = opts.onError ?? ((err, topic, group) => console.error(`bus: ${topic}/${group}: batch failed, retrying:`, err));
  }

  private topic(name: string): TopicState {
    let t = this.topics.get(name);
    if (!t) {
      t = { name, logs: Array.from({ length: this.partitions }, () => ({ records: [], base: 0 })), groups: new Map(), groupList: [], waiters: [] };
      this.topics.set(name, t);
      this.topicList.push(t);
    }
    return t;
  }

  publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('bus is closed'));
    const t = this.topic(topic.name);
    if (this.lag(t) > this.maxLag) return this.publishWhenRoom(topic.name, t, records);
    // No room to wait for (nearly always): appended in this call, and no promise of its own.
    // Replay publishes every item's question tasks and findings, and an async publish cost
    // it a promise and a turn of the microtask queue each.
    this.append(topic.name, t, records);
    return DONE;
  }

  private async publishWhenRoom(name: string, t: TopicState, records: BusRecord<unknown>[]): Promise<void> {
    while (this.lag(t) > this.maxLag) {
      await new Promise<void>((resolve) => t.waiters.push(resolve));
      if (this.closed) throw new Error('bus is closed');
    }
    this.append(name, t, records);
  }

  private append(name: string, t: TopicState, records: BusRecord<unknown>[]): void {
    // One partition (replay's bus): no key to hash.
    if (this.partitions === 1) for (const r of records) t.logs[0].records.push(r);
    else for (const r of records) t.logs[partitionFor(r.key, this.partitions)].records.push(r);
    for (const g of t.groupList) this.pump(name, t, g);
  }

  private lag(t: TopicState): number {
    let max = 0;
    for (const g of t.groupList) {
      let lag = 0;
      for (let p = 0; p < t.logs.length; p++) lag += t.logs[p].base + t.logs[p].records.length - g.offsets[p];
      if (lag > max) max = lag;
    }
    return max;
  }

  async subscribe<T>(topic: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    const t = this.topic(topic.name);
    let g = t.groups.get(opts.group);
    if (!g) {
      const fromBeginning = opts.fromBeginning ?? true;
      g = {
        name: opts.group,
        offsets: t.logs.map((l) => (fromBeginning ? l.base : l.base + l.records.length)),
        members: [],
      };
      t.groups.set(opts.group, g);
      t.groupList.push(g);
    }
    const member: Member = { handler: async () => undefined, partitions: [], closed: false, busy: undefined };
    member.handler = guardHandler(this, handler as Member['handler'], {
      topic: topic.name,
      group: opts.group,
      stopping: () => member.closed || this.closed,
      onError: (err) => this.onError(err, topic.name, opts.group),
    }, { ...this.opts, counted: () => this.setAsideCount++ });
    g.members.push(member);
    this.assign(g);
    const group = g;
    this.pump(topic.name, t, group);
    return {
      close: async () => {
        member.closed = true;
        await member.busy;
        group.members = group.members.filter((m) => m !== member);
        this.assign(group);
        this.pump(topic.name, t, group);
      },
    };
  }

  /** Round-robin partition assignment, as a rebalance would. */
  private assign(g: Group): void {
    for (const m of g.members) m.partitions = [];
    if (!g.members.length) return;
    for (let p = 0; p < this.partitions; p++) g.members[p % g.members.length].partitions.push(p);
  }

  private pump(name: string, t: TopicState, g: Group): void {
    for (const m of g.members) {
      // Only a member with records waiting on its partitions: a group has more members than
      // partitions (the question service's four consumers on replay's one partition), and
      // each drain started costs a turn of the event loop.
      // drain() clears `busy` itself when it ends (it always yields first, so after this assignment).
      if (!m.busy && !m.closed && this.waiting(t, g, m)) m.busy = this.drain(name, t, g, m);
    }
  }

  private waiting(t: TopicState, g: Group, m: Member): boolean {
    for (const p of m.partitions) if (t.logs[p].base + t.logs[p].records.length > g.offsets[p]) return true;
    return false;
  }

  /**
   * Delivers the member's waiting records until there are none, then clears `busy`; never
   * rejects (a failed batch is retried here), so idle() awaits it as it is.
   */
  private async drain(name: string, t: TopicState, g: Group, m: Member): Promise<void> {
    try {
      // Yield once so a publisher's burst is delivered as one batch: to the end of this turn of
      // the event loop (concurrent exports arrive in separate callbacks of one turn), or, where
      // the publisher waits for each record anyway (replay), only past its own synchronous code.
      if (this.gatherTurn) await new Promise<void>((r) => setImmediate(r));
      else await undefined;
      for (;;) {
        let delivered = false;
        for (const p of m.partitions) {
          if (m.closed || this.closed) return;
          const log = t.logs[p];
          const start = g.offsets[p] - log.base;
          if (start >= log.records.length) continue;
          const records = log.records.slice(start, start + this.maxBatch);
          const batch: BusBatch<unknown> = { topic: name, partition: p, records, heartbeat: noHeartbeat };
          try {
            await m.handler(batch);
          } catch (err) {
            this.onError(err, name, g.name);
            await new Promise((r) => setTimeout(r, this.retryDelayMs));
            delivered = true;
            continue;
          }
          if (!m.partitions.includes(p)) continue; // reassigned meanwhile: the new owner re-reads
          g.offsets[p] += records.length;
          delivered = true;
          this.trim(t, p);
        }
        if (!delivered) return;
      }
    } catch (err) {
      // Not expected (a handler's failure is caught per batch above): said; the records stay for the next pump.
      this.onError(err, name, g.name);
    } finally {
      m.busy = undefined;
    }
  }

  /** Drops records every group has consumed, and wakes publishers held back by lag. */
  private trim(t: TopicState, p: number): void {
    let min = Infinity;
    for (const g of t.groupList) min = Math.min(min, g.offsets[p]);
    const log = t.logs[p];
    const drop = min - log.base;
    if (drop > 4096 || drop === log.records.length) {
      log.records.splice(0, drop);
      log.base = min;
    }
    if (t.waiters.length && this.lag(t) <= this.maxLag) {
      const w = t.waiters.splice(0);
      for (const f of w) f();
    }
  }

  /**
   * Resolves when every group has consumed everything published so far (tests, replay,
   * shutdown). `except` leaves one group out: a handler of that group waiting, inside its own
   * batch, for what it published to be consumed by the others (replay's rule engine).
   */
  async idle(opts?: { except?: string }): Promise<void> {
    const except = opts?.except;
    for (;;) {
      let pending = false;
      // Replay settles after every item that asked a question: one consumer busy is the
      // usual case, awaited as it is (a drain never rejects), without an array or Promise.all.
      let one: Promise<void> | undefined;
      let busy: Promise<void>[] | undefined;
      for (const t of this.topicList) {
        for (const g of t.groupList) {
          if (g.name === except) continue;
          if (g.members.some(isBusy)) pending = true;
          else if (g.members.length && this.lagOf(t, g) > 0) {
            pending = true;
            this.pump(t.name, t, g);
          }
          for (const m of g.members) {
            if (!m.busy) continue;
            if (!one) one = m.busy;
            else (busy ??= [one]).push(m.busy);
          }
        }
      }
      if (!pending) return;
      // Waiting on the consumers themselves, not a timer: replay waits after every record.
      if (busy) await Promise.all(busy);
      else if (one) await one;
      else await new Promise((r) => setTimeout(r, 1));
    }
  }

  /** Records published to `topic` that its slowest group has not processed yet (ingest's back-pressure). */
  backlog(topic: string): number {
    const t = this.topics.get(topic);
    return t ? this.lag(t) : 0;
  }

  private lagOf(t: TopicState, g: Group): number {
    let lag = 0;
    for (let p = 0; p < t.logs.length; p++) lag += t.logs[p].base + t.logs[p].records.length - g.offsets[p];
    return lag;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.topics.values()) {
      for (const w of t.waiters.splice(0)) w();
      for (const g of t.groups.values()) await Promise.all(g.members.map((m) => m.busy));
    }
  }
}
