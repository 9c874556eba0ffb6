import { createHash } from 'node:crypto';
import type { DeadLetter, DeadLetterSink, Queryable } from '@neatroots/ports';
import type { Page } from './records';
import { chunks, decodeCursor, encodeCursor, isoNonNull, num, pageLimit, text, valuesList } from './sql';

/** A dead letter as the REST API lists it. */
export interface DeadLetterRecord {
  id: string;
  project: string;
  source: string;
  kind: string;
  run_id: string | null;
  item_id: string | null;
  reason: string;
  /** The item as JSON text, cut when `truncated`. */
  payload: string;
  truncated: boolean;
  /** How many times it was set aside (a redelivered batch sets it aside again). */
  times: number;
  created_at: string;
  last_at: string;
}

export interface ListDeadLettersQuery {
  limit?: number;
  cursor?: string;
}

/** Payloads are kept up to this many characters: enough to see what was wrong, bounded. */
export const DEAD_LETTER_PAYLOAD_CHARS = 64 * 1024;
/** Reasons are error messages; one that quotes a whole payload is cut. */
const REASON_CHARS = 2_000;
const ROWS_PER_STATEMENT = 200;

/**
 * JSON text of a payload. The payload is what could not be stored, so it may be what breaks
 * JSON.stringify too (nesting past the stack): then a note saying so is kept instead.
 */
function payloadText(v: unknown): string {
  try {
    return JSON.stringify(v) ?? 'null';
  } catch (e) {
    return JSON.stringify(`(not serializable: ${(e as Error).message})`);
  }
}

const cut = (s: string, n: number) => (s.length > n ? s.slice(0, n) : s);

const COLUMNS = 'id, project, source, kind, run_id, item_id, reason, payload, truncated, times, created_at, last_at';

function toRecord(row: Record<string, unknown>): DeadLetterRecord {
  return {
    id: String(row.id),
    project: String(row.project),
    source: String(row.source),
    kind: String(row.kind),
    run_id: (row.run_id as string | null) ?? null,
    item_id: (row.item_id as string | null) ?? null,
    reason: String(row.reason),
    payload: String(row.payload),
    truncated: Boolean(row.truncated),
    times: num(row.times),
    created_at: isoNonNull(row.created_at),
    last_at: isoNonNull(row.last_at),
  };
}

/** The dead_letters table: where set-aside items are kept, and their list per project. */
export class DeadLettersRepo implements DeadLetterSink {
  constructor(
    private readonly db: Queryable,
    private readonly maxPayloadChars = DEAD_LETTER_PAYLOAD_CHARS,
  ) {}

  /** Stores them; the same item set aside again is counted on its row (`times`), not added. */
  async setAside(letters: readonly DeadLetter[]): Promise<void> {
    const rows = new Map<string, unknown[]>();
    for (const l of letters) {
      // A letter cut to travel on the bus (DeadLetter.payload_cut) is stored as cut, and says so.
      const full = l.payload_cut ?? payloadText(l.payload);
      const id = createHash('sha256').update(`${l.source}\u001f${l.project}\u001f${l.kind}\u001f${full}`).digest('hex').slice(0, 32);
      const payload = cut(full, this.maxPayloadChars);
      rows.set(id, [
        id, text(l.project), text(l.source), text(l.kind), text(l.run_id), text(l.item_id),
        text(cut(l.reason, REASON_CHARS)), text(payload), payload.length < full.length || l.payload_cut !== undefined,
      ]);
    }
    for (const part of chunks([...rows.values()], ROWS_PER_STATEMENT)) {
      const values = valuesList(part.length, ['text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'boolean']);
      await this.db.query(
        `INSERT INTO dead_letters AS d (id, project, source, kind, run_id, item_id, reason, payload, truncated)
         VALUES ${values}
         ON CONFLICT (id) DO UPDATE SET times = d.times + 1, last_at = now(), reason = EXCLUDED.reason`,
        part.flat(),
      );
    }
  }

  /** A project's dead letters, newest first, paged like the other lists. */
  async list(project: string, q: ListDeadLettersQuery = {}): Promise<Page<DeadLetterRecord>> {
    const limit = pageLimit(q.limit);
    const params: unknown[] = [project];
    let where = 'project = $1';
    if (q.cursor !== undefined) {
      const c = decodeCursor('dead_letters', q.cursor);
      params.push(c.at, c.id);
      where += ` AND (created_at, id) < ($2::timestamptz, $3::text)`;
    }
    params.push(limit + 1);
    const res = await this.db.query(
      `SELECT ${COLUMNS} FROM dead_letters WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
      params,
    );
    const items = res.rows.slice(0, limit).map(toRecord);
    const last = items[items.length - 1];
    return { items, next_cursor: res.rows.length > limit && last ? encodeCursor('dead_letters', last.created_at, last.id) : null };
  }

  /**
   * Deletes up to `limit` dead letters last set aside before `before` (epoch ms), oldest first;
   * returns how many. Span retention calls it: a dead letter may hold a span's content.
   */
  async expire(before: number, limit = 1_000): Promise<number> {
    const res = await this.db.query<{ n: unknown }>(
      `WITH d AS (
         DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters WHERE last_at < $1::timestamptz ORDER BY last_at LIMIT $2) RETURNING 1
       )
       SELECT count(*)::int AS n FROM d`,
      [new Date(before).toISOString(), limit],
    );
    return num(res.rows[0]?.n);
  }
}
