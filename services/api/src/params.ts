import { FINDING_STATE_FILTERS, type FindingStateFilter, type ListFindingsQuery, type ListRunsQuery } from '@neatroots/store';
import { ApiError } from './errors';

/** Query and body parsing: anything malformed is a 400 that names the parameter. */
type Query = Record<string, unknown>;

function one(q: Query, name: string): string | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw ApiError.badRequest('invalid_query', `${name} must be given once, as a string`);
  return v;
}

function bool(q: Query, name: string): boolean | undefined {
  const v = one(q, name);
  if (v === undefined) return undefined;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw ApiError.badRequest('invalid_query', `${name} must be true or false`);
}

function limit(q: Query): number | undefined {
  const v = one(q, 'limit');
  if (v === undefined) return undefined;
  const n = /^\d{1,4}$/.test(v) ? Number(v) : NaN;
  if (!(n >= 1 && n <= 500)) throw ApiError.badRequest('invalid_query', 'limit must be an integer from 1 to 500');
  return n;
}

function nonEmpty(q: Query, name: string): string | undefined {
  const v = one(q, name);
  if (v === '') throw ApiError.badRequest('invalid_query', `${name} must not be empty`);
  return v;
}

export function runsQuery(q: Query): ListRunsQuery {
  return {
    workflow: nonEmpty(q, 'workflow'),
    has_open_findings: bool(q, 'has_open_findings'),
    limit: limit(q),
    cursor: nonEmpty(q, 'cursor'),
  };
}

export function findingsQuery(q: Query): ListFindingsQuery {
  const state = one(q, 'state');
  if (state !== undefined && !(FINDING_STATE_FILTERS as readonly string[]).includes(state)) {
    throw ApiError.badRequest('invalid_query', `state must be one of ${FINDING_STATE_FILTERS.join(', ')}`);
  }
  return {
    state: state as FindingStateFilter | undefined,
    run_id: nonEmpty(q, 'run_id'),
    include_quiet: bool(q, 'include_quiet'),
    limit: limit(q),
    cursor: nonEmpty(q, 'cursor'),
  };
}

export function dismissBody(body: unknown): { by?: string; note?: string } {
  if (body === undefined || body === null || (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0)) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', 'the body must be a JSON object');
  const b = body as Record<string, unknown>;
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
