import { FINDING_STATE_FILTERS, MAX_PAGE, MAX_SPAN_PAGE, RUN_END_FILTERS, SPAN_BODIES, type FindingStateFilter, type ListFindingsQuery, type ListRunsQuery, type RunDetailQuery, type SpanPageQuery } from '@neatroots/store';
import { parseIsoTime } from '@neatroots/ports';
import { ApiError } from './errors';

/**
 * Query, path and body parsing: anything malformed is a 400 that names the parameter. Every
 * controller reads its query through `parseQuery`, which also rejects a parameter the
 * endpoint does not take: a misspelt filter (`?status=error` for `?state=`) would otherwise
 * be ignored and the caller would take the unfiltered list for the filtered one.
 */
export type QueryParams = Record<string, unknown>;

/** Reads one parameter's text (given once, checked for NUL) into its value. */
export type ParamParser<T> = (value: string, name: string) => T;

// Postgres text cannot hold U+0000: passed on, it fails the query (a 500). The store writes
// it as U+FFFD, so no stored id or name contains it and a 400 loses nothing.
const NUL = '\u0000';

function noNul(where: string, name: string, v: string): string {
  if (v.includes(NUL)) throw ApiError.badRequest(`invalid_${where}`, `${name} must not contain a NUL character (U+0000)`);
  return v;
}

/**
 * The endpoint's query parameters, each read by its parser; absent ones are undefined. A
 * parameter given twice, given as an object (`a[b]=`), or not in `spec` is a 400.
 */
export function parseQuery<S extends Record<string, ParamParser<unknown>>>(
  q: QueryParams,
  spec: S,
  /** Parameters the endpoint reads itself (left out of `q`), named in the unknown-parameter message. */
  readElsewhere: readonly string[] = [],
): { [K in keyof S]?: ReturnType<S[K]> } {
  const unknown = Object.keys(q).filter((k) => !Object.prototype.hasOwnProperty.call(spec, k));
  if (unknown.length) {
    const takes = [...readElsewhere, ...Object.keys(spec)];
    throw ApiError.badRequest(
      'unknown_parameter',
      `unknown query parameter ${unknown.join(', ')}; this endpoint takes ${takes.length ? takes.join(', ') : 'none'}`,
    );
  }
  const out: Record<string, unknown> = {};
  for (const [name, parse] of Object.entries(spec)) {
    const v = q[name];
    if (v === undefined) continue;
    if (typeof v !== 'string') throw ApiError.badRequest('invalid_query', `${name} must be given once, as a string`);
    out[name] = parse(noNul('query', name, v), name);
  }
  return out as { [K in keyof S]?: ReturnType<S[K]> };
}

/**
 * A path segment naming something (a run, a finding): NUL-free, and not "." or "..", which are
 * path steps to a browser, a proxy and most HTTP clients (runs/.. is the project): sent
 * as they are, they reached the route with that name; no id is one (ingest refuses them).
 */
export function pathId(name: string, v: string): string {
  if (v === '.' || v === '..') throw ApiError.badRequest('invalid_path', `${name} must not be "${v}": in a path it is a step up, not a name`);
  return noNul('path', name, v);
}

// ---- parsers ----

/** Free text (a workflow, a check id): not empty. */
export const textParam: ParamParser<string> = (v, name) => {
  if (v === '') throw ApiError.badRequest('invalid_query', `${name} must not be empty`);
  return v;
};

/** An opaque cursor from an earlier page (the store says 400 invalid_cursor for a bad one). */
export const cursorParam: ParamParser<string> = textParam;

export const boolParam: ParamParser<boolean> = (v, name) => {
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw ApiError.badRequest('invalid_query', `${name} must be true or false`);
};

/** A page size from 1 to `max`. */
export function limitParam(max: number): ParamParser<number> {
  return (v, name) => {
    const n = /^\d{1,7}$/.test(v) ? Number(v) : NaN;
    if (!(n >= 1 && n <= max)) throw ApiError.badRequest('invalid_query', `${name} must be an integer from 1 to ${max}`);
    return n;
  };
}

/** One of a fixed set of words. */
export function oneOf<T extends string>(values: readonly T[]): ParamParser<T> {
  return (v, name) => {
    if (!(values as readonly string[]).includes(v)) throw ApiError.badRequest('invalid_query', `${name} must be one of ${values.join(', ')}`);
    return v as T;
  };
}

/**
 * An ISO-8601 date or time (from, to), answered as UTC ISO-8601: a day or time that does not
 * exist (2026-02-31) is refused rather than rolled over, a time without an offset is UTC
 * (not the server's zone), as the review window reads them, and one outside 0001-9999 is refused.
 */
export const timeParam: ParamParser<string> = (v, name) => {
  const ms = parseIsoTime(v);
  if (ms === null) throw ApiError.badRequest('invalid_query', `${name} must be an ISO-8601 date or time from 0001-01-01 to 9999-12-31 UTC, e.g. 2026-11-30 or 2026-11-30T10:00:00Z (a time without an offset is UTC)`);
  return new Date(ms).toISOString();
};

// ---- the endpoints' queries ----

export function runsQuery(q: QueryParams): ListRunsQuery {
  return parseQuery(q, {
    workflow: textParam,
    session_id: textParam,
    end_status: oneOf(RUN_END_FILTERS),
    has_open_findings: boolParam,
    from: timeParam,
    to: timeParam,
    limit: limitParam(MAX_PAGE),
    cursor: cursorParam,
  });
}

export function findingsQuery(q: QueryParams): ListFindingsQuery {
  return parseQuery(q, {
    state: oneOf<FindingStateFilter>(FINDING_STATE_FILTERS),
    run_id: textParam,
    include_quiet: boolParam,
    limit: limitParam(MAX_PAGE),
    cursor: cursorParam,
  });
}

/** A run's spans: the run page's first page, or any page after it. */
export function spansQuery(q: QueryParams): SpanPageQuery {
  return parseQuery(q, { limit: limitParam(MAX_SPAN_PAGE), cursor: cursorParam, bodies: oneOf(SPAN_BODIES) });
}

/** The run page: its spans' bodies whole or cut to a preview; `since` an earlier answer's spans_since. */
export function runQuery(q: QueryParams): RunDetailQuery {
  return parseQuery(q, { bodies: oneOf(SPAN_BODIES), since: cursorParam });
}

/** An endpoint that takes no query parameters. */
export function noQuery(q: QueryParams): void {
  parseQuery(q, {});
}

/**
 * An endpoint that takes no body: none, an empty one or `{}` (what clients send) is fine; a
 * field or any other JSON is 400 invalid_body, as for an endpoint's unknown field.
 */
export function noBody(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body === 'object' && !Array.isArray(body)) {
    const fields = Object.keys(body);
    if (fields.length) throw ApiError.badRequest('invalid_body', `unknown field ${fields.join(', ')} in the body; this endpoint takes no body`);
    return;
  }
  throw ApiError.badRequest('invalid_body', 'this endpoint takes no body (send none, or {})');
}

export function dismissBody(body: unknown): { by?: string; note?: string } {
  if (body === undefined || body === null || (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0)) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', 'the body must be a JSON object');
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => k !== 'by' && k !== 'note');
  if (unknown.length) throw ApiError.badRequest('invalid_body', `unknown field ${unknown.join(', ')} in the body; it takes by, note`);
  const out: { by?: string; note?: string } = {};
  for (const k of ['by', 'note'] as const) {
    const v = b[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw ApiError.badRequest('invalid_body', `${k} must be a string`);
    if (v.length > 10_000) throw ApiError.badRequest('invalid_body', `${k} is longer than 10000 characters`);
    out[k] = v;
  }
  return out;
}
