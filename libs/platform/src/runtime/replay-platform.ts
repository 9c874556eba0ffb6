import type { Db, Jobs, Platform, RecordedClock, WindowStore } from '@neatroots/ports';
import { MemoryBus } from '../bus/memory';
import { InlineJobs } from '../jobs/inline';
import { MemoryWindowStore } from '../windows/memory';

/** The recording's time on the in-process bus: moved forward item by item, never back. */
export class BusRecordedClock implements RecordedClock {
  private t = 0;

  constructor(private readonly bus: MemoryBus) {}

  now(): number {
    return this.t;
  }

  advance(t: number | undefined): void {
    if (t !== undefined && t > this.t) this.t = t;
  }

  settle(group: string): Promise<void> {
    return this.bus.idle({ except: group });
  }
}

export interface ReplayPlatform extends Platform {
  bus(): MemoryBus;
  readonly clock: BusRecordedClock;
}

/**
 * `neatroots replay`'s drivers: the in-process bus with one partition (every record in the
 * order it was published, so findings come in the recording's order), run windows in memory
 * that never expire (a recording's runs may be hours apart), the recording's clock, and no
 * database (replay keeps nothing).
 */
export function replayPlatform(opts: { onError?: (err: unknown, topic: string, group: string) => void } = {}): ReplayPlatform {
  const bus = new MemoryBus({ partitions: 1, gatherTurn: false, onError: opts.onError });
  const clock = new BusRecordedClock(bus);
  let jobs: InlineJobs | undefined;
  return {
    kind: 'replay',
    clock,
    bus: () => bus,
    // Expiry is measured against time 0: never.
    windows: async <W>(): Promise<WindowStore<W>> => new MemoryWindowStore<W>(() => 0),
    db: (): Promise<Db> => Promise.reject(new Error('replay keeps nothing: there is no database')),
    jobs: async (): Promise<Jobs> => (jobs ??= new InlineJobs()),
    ready: async () => true,
    drain: () => bus.idle(),
    close: async () => {
      await bus.close();
      await jobs?.close();
    },
  };
}
