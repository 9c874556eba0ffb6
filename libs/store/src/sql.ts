/**
 * Small helpers the repositories share: parameter placeholders for multi-row statements,
 * values made safe for Postgres, times, and the opaque cursors of the list endpoints.
 */

import { parseIsoTime } from '@neatroots/ports';

/** A bad argument from a caller (a malformed cursor, an unknown state): the API answers 400. */
export class StoreInputError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'StoreInputError';
  }
}

/**
 * `($1::text, $2::jsonb), ($3::text, $4::jsonb)` for `rows` rows of these column casts,
 * numbering from `$start`. Casts make the statement mean the same on both drivers.
 */
export function valuesList(rows: number, casts: readonly string[], start = 1): string {
  const out: string[] = [];
  let n = start;
  for (let r = 0; r < rows; r++) {
    out.push(`(${casts.map((c) => `$${n++}::${c}`).join(', ')})`);
  }
  return out.join(', ');
}

/** Splits `items` in chunks of at most `size` (statements stay well under 65535 parameters). */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

// Postgres text and jsonb cannot hold U+0000; spans copied from tool output sometimes do.
// Replacing it keeps one odd character from making a batch fail forever.
const NUL = '\u0000';
const REPLACEMENT = '\uFFFD';

/** A string for a text column, NUL characters replaced. */
export function text(v: string | null | undefined): string | null {
  if (v === undefined || v === null) return null;
  return v.includes(NUL) ? v.replaceAll(NUL, REPLACEMENT) : v;
}

/** JSON text for a jsonb parameter (`$n::jsonb`); SQL NULL for undefined. */
export function json(v: unknown): string | null {
  if (v === undefined) return null;
  const s = JSON.stringify(v);
  if (s === undefined) return null;
  return storableJson(s);
}

/**
 * JSON.stringify's text as Postgres takes it (json does; see below), or several such texts
 * joined by a character that is not a backslash (a line break: the text of many is fixed at
 * once, and the same as each fixed alone, as an escape never runs across it). Looking at each
 * text alone made V8 flatten every span's JSON (its builder's pieces) into a copy of its own:
 * a third of the bytes the spans' JSON allocated.
 */
export function storableJson(text: string): string {
  let s = text;
  // Postgres's jsonb refuses \u0000. Rewriting the escapes in the output (only those preceded by
  // an even number of backslashes: real escapes, not a user's literal "\\u0000") is much
  // cheaper than a replacer function called on every value of every span.
  if (s.includes('\\u0000')) s = s.replace(/(?<!\\)((?:\\\\)*)\\u0000/g, '$1\\ufffd');
  // jsonb refuses half of a surrogate pair too (text cut in the middle of an emoji, from an
  // agent's own truncation). JSON.stringify writes a whole pair as the character itself and
  // only a half as a \udXXX escape, so every such escape is a half: it becomes U+FFFD, as the
  // gRPC path's UTF-8 decoding already makes it.
  if (s.includes('\\ud')) s = s.replace(/(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/g, '$1\\ufffd');
  return s;
}

/** Epoch milliseconds as an ISO-8601 string for a `$n::timestamptz` parameter. */
export function tsParam(ms: number | null | undefined): string | null {
  if (ms === undefined || ms === null || !Number.isFinite(ms)) return null;
  return new Date(ms).toISOString();
}

/** A timestamptz as read by either driver (a Date), as ISO-8601; null stays null. */
export function iso(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  // A Date of another realm (a vm context, as jest runs code in) is no `instanceof Date`, and
  // String() of it drops the milliseconds: findings raised in one second then shared a cursor
  // position and a page skipped some.
  if (v instanceof Date || Object.prototype.toString.call(v) === '[object Date]') return (v as Date).toISOString();
  return new Date(String(v)).toISOString();
}

export function isoNonNull(v: unknown): string {
  return iso(v) ?? new Date(0).toISOString();
}

/** An int4/int8/float column as a number. */
export function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v === null || v === undefined) return 0;
  return Number(v);
}

/** The lists a cursor can belong to: a cursor names its list, and another list refuses it. */
export type CursorList = 'runs' | 'findings' | 'dead_letters' | 'sessions';

/**
 * A cursor's time exactly as the lists write it: UTC ISO-8601 with milliseconds (toISOString)
 * or microseconds (a run's start). Anything else is refused before Postgres reads it (Date.parse
 * takes "March 7", "1" or year -1, which Postgres refuses or cannot hold: a 500).
 */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(?:\d{3})?Z$/;

function refuseCursor(): never {
  throw new StoreInputError('invalid_cursor', 'cursor is not one this list returned');
}

/**
 * What an opaque list cursor (base64url JSON, as the lists write it) holds, or undefined when it
 * is not one; each list checks the shape it wrote and refuses anything else as its own error.
 */
export function cursorJson(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Opaque list cursors: the list's name and the sort key of the last item returned. A cursor
 * written before the list's name was in it (["<time>", "<id>"]) is refused: it could belong to
 * any of the lists, and a client starts again from the first page.
 */
export function encodeCursor(list: CursorList, at: string, id: string): string {
  return Buffer.from(JSON.stringify([list, at, id]), 'utf8').toString('base64url');
}

export function decodeCursor(list: CursorList, cursor: string): { at: string; id: string } {
  const parsed = cursorJson(cursor);
  if (
    !Array.isArray(parsed) || parsed.length !== 3 || parsed[0] !== list ||
    typeof parsed[1] !== 'string' || typeof parsed[2] !== 'string' ||
    !CURSOR_TIME.test(parsed[1]) || parseIsoTime(parsed[1]) === null || parsed[2].includes(NUL)
  ) {
    refuseCursor();
  }
  return { at: parsed[1], id: parsed[2] };
}

/**
 * A run's spans, after the last one of a page: its start (null: spans without one, listed
 * last) and its arrival number. A different shape from the lists' cursors, and it names its
 * run, so one passed to another list or another run's spans is refused rather than misread.
 *
 * `stored: true`: the spans stored after the one of that arrival number, in the order they
 * were stored (a run page's `spans_since`; `start` is null): where a page that follows a run
 * still going goes on from.
 */
export interface SpanCursor {
  start: number | null;
  arrival: string;
  stored?: true;
  /**
   * A run page's `spans_since` only: its findings watermark (FindingsRepo.watermark, a
   * database snapshot), where the
   * findings written after that answer start. Absent from one written before it was (the next
   * answer then gives the run's newest findings, as a first answer does).
   */
  findings?: string;
}

export function encodeSpanCursor(runId: string, c: SpanCursor): string {
  const json = c.stored ? { r: runId, a: c.arrival, o: 'stored', ...(c.findings === undefined ? {} : { f: c.findings }) } : { r: runId, s: c.start, a: c.arrival };
  return Buffer.from(JSON.stringify(json), 'utf8').toString('base64url');
}

export function decodeSpanCursor(runId: string, cursor: string): SpanCursor {
  const parsed = cursorJson(cursor) as { r?: unknown; s?: unknown; a?: unknown; o?: unknown; f?: unknown } | undefined;
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || parsed.r !== runId || typeof parsed.a !== 'string' || !/^\d{1,18}$/.test(parsed.a)) {
    refuseCursor();
  }
  if (parsed.o === 'stored' && parsed.s === undefined) {
    if (parsed.f === undefined) return { start: null, arrival: parsed.a, stored: true };
    // a pg_snapshot: xmin:xmax:the transactions running then (one a connection at most)
    if (typeof parsed.f !== 'string' || parsed.f.length > 65_536 || !/^\d{1,20}:\d{1,20}:(\d{1,20}(,\d{1,20})*)?$/.test(parsed.f)) refuseCursor();
    return { start: null, arrival: parsed.a, stored: true, findings: parsed.f };
  }
  if (parsed.f !== undefined || parsed.o !== undefined || !(parsed.s === null || (typeof parsed.s === 'number' && Number.isFinite(parsed.s)))) refuseCursor();
  return { start: parsed.s as number | null, arrival: parsed.a };
}

/** Runs and findings: a page is 50 of them unless asked, at most 500. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;
/** A run's spans: 500 a page unless asked, at most 2,000 (a 100,000-span run was one 18 MB answer). */
export const DEFAULT_SPAN_PAGE = 500;
export const MAX_SPAN_PAGE = 2000;
/**
 * The most bytes of span JSON one page of spans holds (the run page's first page too): a page
 * stops before its `limit` where the next span would take it past this, says so
 * (`cut_at_bytes`) and gives the cursor to the rest; its first span is always in it, whatever
 * its size (one span: up to 12 MiB + 64 KiB at the default NEATROOTS_MAX_ITEM_CHARS). The
 * distributed api reads a page from the review service in one gRPC reply: 500 spans of 300 KB
 * were 150 MB, and no reply limit took them (services/api review-client.ts, REVIEW_REPLY_BYTES).
 */
export const SPAN_PAGE_BYTES = 16 * 1024 * 1024;

export function pageLimit(limit: number | undefined, dflt = DEFAULT_PAGE, max = MAX_PAGE): number {
  if (limit === undefined) return dflt;
  if (!Number.isInteger(limit) || limit < 1 || limit > max) {
    throw new StoreInputError('invalid_limit', `limit must be an integer from 1 to ${max}`);
  }
  return limit;
}

/**
 * Text a caller filters by. Postgres text cannot hold U+0000 (the query would fail); no
 * stored value holds one either (text() replaces it on write), so it is the caller's error.
 */
export function filterText(name: string, v: string): string {
  if (v.includes(NUL)) throw new StoreInputError('invalid_argument', `${name} must not contain a NUL character (U+0000)`);
  return v;
}
