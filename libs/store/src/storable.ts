import { type FindingMessage } from '@neatroots/messages';
import { measureJson, type Envelope } from '@neatroots/spans';
import type { DeliveryInput } from './findings.repo';

/** One item of a store write. */
export type StoreItem =
  | { kind: 'event'; value: Envelope }
  | { kind: 'finding'; value: FindingMessage }
  | { kind: 'delivery'; value: DeliveryInput };

/**
 * Deeper JSON is not sent to the database: embedded Postgres (PGlite) does not refuse it, it
 * crashes (its WebAssembly stack overflows at a few thousand levels) and takes every later
 * write with it. Ingest's NEATROOTS_MAX_JSON_DEPTH is far below this.
 */
export const STORE_MAX_JSON_DEPTH = 512;

/** Times are stored as ISO-8601 timestamps, which Postgres reads up to the year 9999. */
const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const EARLIEST_MS = Date.UTC(1, 0, 1);

function badTime(field: string, ms: number | undefined): string | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < EARLIEST_MS || ms > LATEST_MS) return `${field} ${ms} is outside the times the store can hold (years 1 to 9999)`;
  return undefined;
}

function tooDeep(field: string, v: unknown): string | undefined {
  if (v === undefined) return undefined;
  return measureJson(v, STORE_MAX_JSON_DEPTH, Infinity).tooDeep ? `${field} is JSON nested more than ${STORE_MAX_JSON_DEPTH} levels deep` : undefined;
}

/**
 * Why an item cannot be stored, found without sending it (undefined: try it). Only what would
 * break the database or the driver is looked at here; anything else the database refuses is
 * found by the writer narrowing a failed batch down.
 */
export function unstorable(it: StoreItem): string | undefined {
  if (it.kind === 'event') {
    const env = it.value;
    const item = env.item;
    const r = badTime('received_ms', env.received_ms);
    if (r) return r;
    if (item.kind === 'span') {
      const s = item.span;
      return badTime('start_ms', s.start_ms) ?? badTime('end_ms', s.end_ms) ??
        tooDeep('input', s.input) ?? tooDeep('output', s.output) ?? tooDeep('attributes', s.attributes);
    }
    if (item.kind === 'run_start') return badTime('ts_ms', item.run.ts_ms) ?? tooDeep('tools', item.run.tools);
    return badTime('ts_ms', item.run.ts_ms) ?? tooDeep('final_output', item.run.final_output);
  }
  if (it.kind === 'finding') return badTime('at_ms', it.value.at_ms) ?? badTime('received_ms', it.value.received_ms);
  return badTime('at_ms', it.value.at_ms);
}
