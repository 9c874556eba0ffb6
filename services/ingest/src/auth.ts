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

/** Resolves an API key to its project's name; undefined for an unknown key. */
export type ResolveKey = (key: string) => Promise<string | undefined>;
