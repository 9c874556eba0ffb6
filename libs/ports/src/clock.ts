/** Time as the pipeline sees it: the wall clock live, the recorded clock in replay. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * The recording's time (replay). The rule engine moves it to each recorded item's time as it
 * reaches the item, so a batch of many items is processed as if each had come alone.
 */
export interface RecordedClock extends Clock {
  /** Moves to `t` when later than now (an item stamped earlier than the one before waits for nothing). */
  advance(t: number | undefined): void;
  /**
   * Resolves once everything published so far has been consumed by every group but `group`
   * (the caller's own, still in its batch): an item's questions are answered and its findings
   * delivered before the next item, so the output comes in the recording's order.
   */
  settle(group: string): Promise<void>;
}
