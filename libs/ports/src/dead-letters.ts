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
  /**
   * With `payload_cut`, when the payload was a list (a record of question tasks): each item's
   * short fields, so what needs to know which items it held still does (the tasks' project, ids,
   * runs and checks). Its strings up to ITEM_FIELD_CHARS, a list of strings up to
   * ITEM_LIST_LENGTH of them, and of an object field only its `id`; as many items as fit in
   * DEAD_LETTER_TRAVEL_CHARS / 4 characters (the rest are left out).
   */
  payload_items?: Record<string, unknown>[];
}

/** A cut letter's payload_items keep a string field up to this many characters (longer ones are left out). */
const ITEM_FIELD_CHARS = 1_024;
/** ... and a list of strings (a task's span_ids) up to this many of them. */
const ITEM_LIST_LENGTH = 256;

/** The short fields of a list payload's items, for a letter whose payload is cut (DeadLetter.payload_items). */
function payloadItems(payload: unknown, budget: number): Record<string, unknown>[] | undefined {
  if (!Array.isArray(payload)) return undefined;
  const out: Record<string, unknown>[] = [];
  let used = 2;
  for (const item of payload) {
    if (!item || typeof item !== 'object' || Array.isArray(item)) continue;
    const slim: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(item as Record<string, unknown>)) {
      if (typeof v === 'number' || typeof v === 'boolean' || v === null) slim[k] = v;
      else if (typeof v === 'string') {
        if (v.length <= ITEM_FIELD_CHARS) slim[k] = v;
      } else if (Array.isArray(v)) {
        if (v.length <= ITEM_LIST_LENGTH && v.every((x) => typeof x === 'string' && x.length <= ITEM_FIELD_CHARS)) slim[k] = v;
      } else if (v && typeof v === 'object') {
        const id = (v as Record<string, unknown>).id;
        if (typeof id === 'string' && id.length <= ITEM_FIELD_CHARS) slim[k] = { id };
      }
    }
    const chars = JSON.stringify(slim).length + 1;
    if (used + chars > budget) break;
    used += chars;
    out.push(slim);
  }
  return out.length ? out : undefined;
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
        // A list's items keep their short fields (a record of question tasks still names them),
        // in room taken from the cut text, so the letter is no larger than before.
        const items = payloadItems(payload, DEAD_LETTER_TRAVEL_CHARS / 4);
        const room = DEAD_LETTER_TRAVEL_CHARS - (items ? JSON.stringify(items).length : 0);
        const cut = (JSON.stringify(payload) ?? 'null').slice(0, room);
        text = JSON.stringify({ ...rest, reason: rest.reason.slice(0, DEAD_LETTER_TRAVEL_CHARS), payload: null, payload_cut: cut, ...(items && { payload_items: items }) });
      }
      return new TextEncoder().encode(text);
    },
    decode: (b) => JSON.parse(new TextDecoder().decode(b)) as DeadLetter,
  };
}
