import type { Metadata } from '@grpc/grpc-js';

/**
 * The API key of a call: `x-api-key: KEY` (what OpenTelemetry exporters are usually given as
 * a header) or `authorization: Bearer KEY`.
 */
export function apiKeyFrom(md: Metadata): string | undefined {
  const direct = md.get('x-api-key')[0];
  if (typeof direct === 'string' && direct.trim()) return direct.trim();
  const auth = md.get('authorization')[0];
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth.trim());
    if (m) return m[1];
  }
  return undefined;
}

/**
 * What a key may do: `api`, a full key, everything; `ingest`, what an agent needs at run time
 * (send spans, its runs' notes and halts, pre-call checks), not the whole project's notes.
 */
export type KeyScope = 'api' | 'ingest';

/** The project a key opens, and its scope. */
export interface KeyGrant {
  project: string;
  scope: KeyScope;
}

/**
 * Resolves an API key: its project and scope, or its project's name alone (a full key, as every
 * key was before scopes); undefined for an unknown key.
 */
export type ResolveKey = (key: string) => Promise<KeyGrant | string | undefined>;

/** A resolved key as a grant: a bare project name is a full key. */
export function grantOf(resolved: KeyGrant | string | undefined): KeyGrant | undefined {
  if (resolved === undefined || resolved === '') return undefined;
  if (typeof resolved === 'string') return { project: resolved, scope: 'api' };
  return resolved.project ? resolved : undefined;
}

/** What an ingest key is told when it asks for the whole project's notes (Subscribe with no run). */
export const PROJECT_STREAM_REFUSED = "a key of scope ingest may subscribe to one run's notes, not the whole project's; use a full key";
