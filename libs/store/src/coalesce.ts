/**
 * Calls of one statement made while it is already running go out together as the next one.
 *
 * A statement's cost is mostly fixed: on PGlite each is a trip to the database thread plus a
 * parse and a plan (about a millisecond on a busy machine), and a row more costs a tenth of
 * that; on Postgres, a network round trip. So a repository that many callers hit at once
 * (sessions received, checks saved) sends one statement for a row, and while that runs,
 * gathers the calls that arrive into one multi-row statement, and so on: alone a call waits
 * for nothing, under load the statements grow instead of queueing.
 *
 * `run` answers each item of a batch in order. When a batch fails, each of its items is run
 * again alone, so one bad row fails only its own call.
 */
export class Coalescer<I, O> {
  private waiting: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    /**
     * maxInFlight: 1 on PGlite (one connection: more would only queue there); a few on Postgres.
     * maxBatchBytes, with `bytes` (an item's size): a batch takes no further item past that many
     * bytes (its first item goes whatever its size). On PGlite a statement's parameters are
     * copied into its WebAssembly memory and parsed there, and that memory grows to the largest
     * statement and is never given back: 16 sessions of 3.2 MB in one insert grew it by about
     * 350 MB for good, one at a time by about 35 MB.
     */
    private readonly opts: { maxBatch: number; maxInFlight: number; maxBatchBytes?: number; bytes?: (item: I) => number },
  ) {}

  call(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      // Calls made in the same tick (a burst) share the first statement too.
      if (this.waiting.length === 1) queueMicrotask(() => this.pump());
    });
  }

  private pump(): void {
    while (this.waiting.length && this.inFlight < this.opts.maxInFlight) {
      const batch = this.waiting.splice(0, this.batchLength());
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** How many of the waiting calls the next batch takes: maxBatch, fewer past maxBatchBytes. */
  private batchLength(): number {
    const { maxBatch, maxBatchBytes, bytes } = this.opts;
    if (maxBatchBytes === undefined || !bytes) return maxBatch;
    let n = 0;
    for (let sum = 0; n < Math.min(maxBatch, this.waiting.length); n++) {
      sum += bytes(this.waiting[n].item);
      if (n > 0 && sum > maxBatchBytes) break;
    }
    return Math.max(1, n);
  }

  private async send(batch: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[]): Promise<void> {
    try {
      const out = await this.run(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(out[i]));
    } catch (err) {
      if (batch.length === 1) return batch[0].reject(err);
      for (const b of batch) {
        try {
          b.resolve((await this.run([b.item]))[0]);
        } catch (e) {
          b.reject(e);
        }
      }
    }
  }
}

/** In-flight statements of one coalesced kind: one on PGlite's single connection, a few on a pool. */
export function coalescedInFlight(kind: 'pglite' | 'postgres'): number {
  return kind === 'pglite' ? 1 : 4;
}
