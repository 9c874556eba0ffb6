/**
 * A consumer's offset commits, off its fetch loop. kafkajs handles a fetch's partition batches
 * a few at a time and fetches again only when all of them are done; a commit awaited in each
 * batch (a round trip to the group coordinator, which writes it to its log) held every batch
 * behind it: measured on loopback, 30-40 ms from a record's publish to its handler against
 * 2-6 ms with the commits taken off the loop (docs/performance.md).
 *
 * Here a handled batch only records its partition's next offset; one commit at a time sends
 * every offset recorded since the last, so the commits follow the batches and coalesce under
 * load. Only offsets of handled batches are ever recorded, so nothing unhandled is committed; a
 * crash re-reads what was handled since the last commit (the consumers are idempotent, as for
 * a rebalance). A commit that fails is reported and not retried: the partition's next batch
 * records a newer offset, and a stopping consumer flushes before it leaves its group.
 */
export class CommitQueue {
  private pending = new Map<number, string>();
  private running: Promise<void> | undefined;
  /** Commits sent and offsets they carried (a commit carries every partition recorded since the last). */
  readonly counts = { commits: 0, offsets: 0, failed: 0 };

  constructor(
    private readonly commit: (offsets: { partition: number; offset: string }[]) => Promise<void>,
    private readonly onError: (err: unknown) => void,
    /** Each commit sent, and whether it failed (the bus's counters). */
    private readonly onCommit: (failed: boolean) => void = () => undefined,
  ) {}

  /** Records that a partition's batches before `offset` are handled; a commit carries it soon. */
  record(partition: number, offset: string): void {
    const had = this.pending.get(partition);
    if (had === undefined || BigInt(offset) > BigInt(had)) this.pending.set(partition, offset);
    this.running ??= this.drain();
  }

  /** Resolves once every offset recorded before the call is committed (or its commit failed). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    // Later than the batch that started it: the batches finishing in the same turn join this commit.
    await Promise.resolve();
    while (this.pending.size) {
      const offsets = [...this.pending].map(([partition, offset]) => ({ partition, offset }));
      this.pending = new Map();
      try {
        await this.commit(offsets);
        this.counts.commits++;
        this.counts.offsets += offsets.length;
        this.onCommit(false);
      } catch (err) {
        this.counts.failed++;
        this.onCommit(true);
        this.onError(err);
      }
    }
    this.running = undefined;
  }
}
