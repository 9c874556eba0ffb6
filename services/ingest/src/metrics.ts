/**
 * Ingest counters as a plain object (exposed to Prometheus by the caller). "Items" are what a
 * client sends one by one: OTLP spans, and neatroots.v1 events (spans and run events).
 */
export interface IngestMetrics {
  /** Export calls by API, once past the key check (a call without a known key is refused before). */
  exports: { otlp: number; neatroots: number };
  items_received: number;
  items_accepted: number;
  /**
   * Records published on the events topic: the items accepted, and with an OTLP span that opens
   * or ends its run the run_start or run_end it gives (so more than items_accepted over OTLP).
   */
  records_published: number;
  /** Rejected items by the field at fault (`trace_id`, `run_id`, `project`, ...): bounded labels. */
  items_rejected: Record<string, number>;
  /**
   * Exports refused by back-pressure (RESOURCE_EXHAUSTED, over OTLP/HTTP 429), by reason:
   * `backlog`, `memory`. Exports, not their items: a refused export is not decoded, so what it
   * holds is not known.
   */
  exports_refused: Record<string, number>;
  /** Calls refused as a whole, by gRPC status name. */
  calls_failed: Record<string, number>;
  notes_received: number;
  /** Notes that reached an agent, by path. */
  notes_delivered: { stream: number; piggyback: number };
  /** Notes kept for piggybacking that expired or were pushed out by the bounds. */
  notes_dropped: number;
  /** Notes held back because their group already sent one in the run. */
  notes_grouped: number;
  /** Open Subscribe streams (a gauge). */
  subscribers: number;
}

export function newMetrics(): IngestMetrics {
  return {
    exports: { otlp: 0, neatroots: 0 },
    items_received: 0,
    items_accepted: 0,
    records_published: 0,
    items_rejected: {},
    exports_refused: {},
    calls_failed: {},
    notes_received: 0,
    notes_delivered: { stream: 0, piggyback: 0 },
    notes_dropped: 0,
    notes_grouped: 0,
    subscribers: 0,
  };
}

export function inc(counter: Record<string, number>, key: string, by = 1): void {
  counter[key] = (counter[key] ?? 0) + by;
}
