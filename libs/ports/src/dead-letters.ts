/**
 * Items set aside: what could not be stored or handled after bounded retries, kept with the
 * reason instead of being retried forever in front of everything behind it. The store writer
 * sets aside items the database refuses; the bus drivers set aside messages whose handler
 * kept throwing (libs/platform/src/bus/set-aside.ts). The store keeps them in `dead_letters`.
 */
export interface DeadLetter {
  /** The project the item belongs to ('' when it names none). */
  project: string;
  /** Where it was set aside: store.events, store.findings, store.deliveries, bus:<topic>/<group>. */
  source: string;
  /** span, run_start, run_end, finding, delivery, message. */
  kind: string;
  run_id?: string;
  /** The span id, finding id, ... */
  item_id?: string;
  /** Why: the last error's message. */
  reason: string;
  /** The item itself (kept as JSON text, cut to a bounded size). */
  payload: unknown;
}

export interface DeadLetterSink {
  /** Keeps them; resolves once they are stored (a caller commits its offset only then). */
  setAside(letters: readonly DeadLetter[]): Promise<void>;
}
