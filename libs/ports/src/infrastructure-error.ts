/**
 * Is an error the message's fault, or a dependency's? The bus guard (set-aside in
 * @neatroots/platform) sets aside only the former; a service answering over gRPC says the
 * latter as UNAVAILABLE, so its callers retry instead of blaming what they were handling.
 */

/** Thrown by a handler: "not this message's fault, take it again later" (never set aside). */
export class RetryLaterError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RetryLaterError';
  }
}

/**
 * An error and its causes (`cause`, as the client libraries wrap what they got), at most
 * `depth` of them: what every "is this error one of ..." question looks through.
 */
export function* causes<T = Record<string, unknown>>(err: unknown, depth = 5): Generator<T & { cause?: unknown }> {
  let e = err;
  for (let i = 0; e && i < depth; i++, e = (e as { cause?: unknown }).cause) yield e as T & { cause?: unknown };
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED',
  // the disk under the data folder: full, over quota, read-only or failing (the embedded stores)
  'ENOSPC', 'EDQUOT', 'EROFS', 'EIO',
]);

/**
 * Postgres SQLSTATEs of a server that cannot work now (08 connection, 53 resources: too many
 * clients, out of memory or disk; 57 operator intervention: shutting down, starting up,
 * a statement timeout; 58 system), and the transaction failures a retry gets past (40001
 * serialization failure, 40P01 deadlock): none says anything about the data.
 */
const SQLSTATE_RETRYABLE = /^(?:(08|53|57|58)[0-9A-Z]{3}|40001|40P01)$/;

/** gRPC status codes of a server that is away, overloaded or too slow: DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNAVAILABLE. */
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_UNAVAILABLE = 14;
const GRPC_UNAUTHENTICATED = 16;

/**
 * The header every call to another service's port carries the deployment's internal token in
 * (NEATROOTS_INTERNAL_TOKEN; @neatroots/platform's runtime/internal-token.ts sends and checks it).
 */
export const INTERNAL_TOKEN_HEADER = 'x-neatroots-internal-token';

/**
 * Whether a gRPC status is another service's refusal for the internal token (UNAUTHENTICATED
 * naming the header): the calling process has a NEATROOTS_INTERNAL_TOKEN other than that
 * service's, or none. A misconfiguration of the deployment, never of what the call was about.
 */
export function isInternalTokenRefusal(code: number, details: string | undefined): boolean {
  return code === GRPC_UNAUTHENTICATED && typeof details === 'string' && details.includes(INTERNAL_TOKEN_HEADER);
}

/**
 * Does this error say a dependency is down rather than that the message is bad? Network
 * errors, a disk that is full or failing, the Postgres SQLSTATEs of a server that cannot work
 * now (classes 08, 53, 57, 58; 40001 and 40P01, which pass on a retry), a gRPC call that found
 * its server away, overloaded or too slow (UNAVAILABLE, RESOURCE_EXHAUSTED but for a message
 * over the size limit, DEADLINE_EXCEEDED) or that another service refused for the internal
 * token (isInternalTokenRefusal: every call fails alike until NEATROOTS_INTERNAL_TOKEN is made
 * the same, and then the same message passes), an HTTP service that is overloaded or failing
 * (429, 5xx: a model endpoint), and the client libraries' own connection errors. The error's
 * causes are looked at too.
 */
export function isInfrastructureError(err: unknown): boolean {
  for (const e of causes<{ name?: unknown; code?: unknown; details?: unknown; message?: unknown; status?: unknown }>(err)) {
    if (e instanceof RetryLaterError) return true;
    if (typeof e.status === 'number' && (e.status === 429 || e.status >= 500)) return true;
    // A gRPC status (grpc-js's ServiceError, or a client's error that kept its code and details).
    if (typeof e.code === 'number' && typeof e.details === 'string') {
      if (e.code === GRPC_UNAVAILABLE || e.code === GRPC_DEADLINE_EXCEEDED) return true;
      // The deployment's tokens differ: no message is at fault, and none may be set aside for it.
      if (isInternalTokenRefusal(e.code, e.details)) return true;
      // A message over the size limit fails the same way every time: that one is the message's.
      if (e.code === GRPC_RESOURCE_EXHAUSTED && !/larger than max/i.test(e.details)) return true;
    }
    const code = typeof e.code === 'string' ? e.code : '';
    if (NETWORK_CODES.has(code) || SQLSTATE_RETRYABLE.test(code)) return true;
    const name = typeof e.name === 'string' ? e.name : '';
    if (/^KafkaJS|^MaxRetriesPerRequestError$|Connection|Timeout|StoreWriterClosedError/.test(name)) return true;
    const msg = typeof e.message === 'string' ? e.message : '';
    // ioredis with its offline queue off (the window store) says "Stream isn't writeable ..." while Redis is away.
    if (/connection (is )?(closed|refused|terminated|reset)|Connection terminated|is closed$|ECONNREFUSED|timed? ?out|Stream isn't writeable|enableOfflineQueue/i.test(msg)) return true;
  }
  return false;
}
