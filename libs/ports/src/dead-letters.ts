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
  /**
   * Instead of `payload`, when the letter was too large to travel whole on the bus: the start of
   * the payload's JSON text (DEAD_LETTER_TRAVEL_CHARS), kept as cut.
   */
  payload_cut?: string;
}

/**
 * A dead letter travels with at most this much of its payload's JSON text: an item set aside
 * may be as large as the bus's largest record, and its letter (the item again, escaped, or its
 * bytes in base64) would then be refused as too large, so the batch behind it could never be
 * set aside and would be read again forever. The store keeps less than this anyway.
 */
export const DEAD_LETTER_TRAVEL_CHARS = 256 * 1024;

export interface DeadLetterSink {
  /** Keeps them; resolves once they are stored (a caller commits its offset only then). */
  setAside(letters: readonly DeadLetter[]): Promise<void>;
}

/**
 * The bus topic dead letters travel on to the review service, which stores them (a process
 * without a database, like the rule engine's, sets aside through it). JSON: they are rare,
 * and their payload is whatever could not be handled.
 */
export function deadLetterTopic(prefix = 'neatroots'): { readonly name: string; encode(v: DeadLetter): Uint8Array; decode(b: Uint8Array): DeadLetter } {
  return {
    name: `${prefix}.dead-letters`,
    encode: (v) => {
      let text: string;
      try {
        text = JSON.stringify(v);
      } catch (e) {
        // what could not be handled may be what JSON.stringify cannot write either (nesting)
        text = JSON.stringify({ ...v, payload: `(not serializable: ${(e as Error).message})` });
      }
      if (text.length > 2 * DEAD_LETTER_TRAVEL_CHARS) {
        const { payload, ...rest } = v;
        const cut = (JSON.stringify(payload) ?? 'null').slice(0, DEAD_LETTER_TRAVEL_CHARS);
        text = JSON.stringify({ ...rest, reason: rest.reason.slice(0, DEAD_LETTER_TRAVEL_CHARS), payload: null, payload_cut: cut });
      }
      return new TextEncoder().encode(text);
    },
    decode: (b) => JSON.parse(new TextDecoder().decode(b)) as DeadLetter,
  };
}
