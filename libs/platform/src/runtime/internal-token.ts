import { timingSafeEqual, createHash } from 'node:crypto';
import { InterceptingCall, Metadata, status as Status, type ClientOptions, type Interceptor, type UntypedServiceImplementation } from '@grpc/grpc-js';

/**
 * The services' own gRPC ports (review, question, the rule engine) answer the other services of
 * the deployment only. With NEATROOTS_INTERNAL_TOKEN set, every call to them carries it in this
 * header and a call without it (or with another) is refused with UNAUTHENTICATED; gRPC health
 * stays open for probes.
 */
export const INTERNAL_TOKEN_HEADER = 'x-neatroots-internal-token';

/** The options a client of another service's port is made with: the token on every call. */
export function internalClientOptions(token: string | undefined): ClientOptions {
  if (!token) return {};
  const interceptor: Interceptor = (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set(INTERNAL_TOKEN_HEADER, token);
        next(metadata, listener);
      },
    });
  return { interceptors: [interceptor] };
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether a call's metadata carries the token (compared in constant time). */
export function hasInternalToken(metadata: Metadata, token: string): boolean {
  const got = metadata.get(INTERNAL_TOKEN_HEADER)[0];
  return typeof got === 'string' && timingSafeEqual(digest(got), digest(token));
}

/**
 * A service implementation whose every method first checks the token: unary and client-streaming
 * calls are answered UNAUTHENTICATED through their callback, streaming ones with an error event.
 */
export function requireInternalToken(impl: UntypedServiceImplementation, token: string | undefined): UntypedServiceImplementation {
  if (!token) return impl;
  const refused = { code: Status.UNAUTHENTICATED, details: `this port answers neatroots's own services only: the call did not carry the deployment's internal token (${INTERNAL_TOKEN_HEADER}, NEATROOTS_INTERNAL_TOKEN)` };
  const out: UntypedServiceImplementation = {};
  for (const [name, fn] of Object.entries(impl)) {
    const method = fn as (call: { metadata: Metadata; emit(e: string, v: unknown): void }, callback?: (err: unknown) => void) => unknown;
    out[name] = ((call: { metadata: Metadata; emit(e: string, v: unknown): void }, callback?: (err: unknown) => void) => {
      if (hasInternalToken(call.metadata, token)) return method(call, callback);
      if (typeof callback === 'function') return callback(Object.assign(new Error(refused.details), refused));
      call.emit('error', Object.assign(new Error(refused.details), refused));
    }) as UntypedServiceImplementation[string];
  }
  return out;
}
