import { timingSafeEqual, createHash } from 'node:crypto';
import { InterceptingCall, Metadata, status as Status, type ClientOptions, type Interceptor, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { INTERNAL_TOKEN_HEADER, isInternalTokenRefusal, type Logger } from '@neatroots/ports';

/**
 * The services' own gRPC ports (review, question, the rule engine) answer the other services of
 * the deployment only. With NEATROOTS_INTERNAL_TOKEN set, every call to them carries it in the
 * header INTERNAL_TOKEN_HEADER and a call without it (or with another) is refused with
 * UNAUTHENTICATED; gRPC health stays open for probes. NEATROOTS_INTERNAL_TOKEN_REQUIRED=false
 * (a rolling upgrade from a build before the token) takes calls carrying none, logged at warn. The header and isInternalTokenRefusal live
 * in @neatroots/ports, where isInfrastructureError counts a refusal as an outage (a bus consumer
 * reads its records again rather than set them aside) and the api answers one 503.
 */
export { INTERNAL_TOKEN_HEADER, isInternalTokenRefusal };

/**
 * The longest a client of another service waits between two tries to connect to it
 * (grpc.max_reconnect_backoff_ms). While a service is away its clients' calls fail at once
 * (the api answers 503, retry shortly) and the channel tries to connect again after a backoff;
 * grpc-js's own bound, 120 s, kept the api answering 503 for up to two minutes after review was
 * back (27 s after an outage of 60 s, measured): every agent's and page's retry in between
 * failed. 5 s: a connection attempt every 5 s to a service that is away is nothing.
 */
export const SERVICE_RECONNECT_MAX_MS = 5_000;

/**
 * The options a client of another service's port is made with: the token on every call, and,
 * with `watch`, every call's status told to it (see InternalTokenWatch); a connection to a
 * service that was away tried again at least every SERVICE_RECONNECT_MAX_MS.
 */
export function internalClientOptions(token: string | undefined, watch?: Pick<InternalTokenWatch, 'heard'>): ClientOptions {
  const reconnect = { 'grpc.max_reconnect_backoff_ms': SERVICE_RECONNECT_MAX_MS };
  if (!token && !watch) return reconnect;
  const interceptor: Interceptor = (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        if (token) metadata.set(INTERNAL_TOKEN_HEADER, token);
        if (!watch) return next(metadata, listener);
        next(metadata, {
          onReceiveStatus(status, nextStatus) {
            watch.heard(status.code, status.details);
            nextStatus(status);
          },
        });
      },
    });
  return { ...reconnect, interceptors: [interceptor] };
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether a call's metadata carries the token (compared in constant time). */
export function hasInternalToken(metadata: Metadata, token: string): boolean {
  const got = metadata.get(INTERNAL_TOKEN_HEADER)[0];
  return typeof got === 'string' && timingSafeEqual(digest(got), digest(token));
}

/** How a refusal for the token begins (the rest says whether the call carried none or another). */
const REFUSED = "this port answers neatroots's own services only";

/**
 * Calls a port took without the internal token, NEATROOTS_INTERNAL_TOKEN_REQUIRED=false (a rolling
 * upgrade from a build before the token, whose services send none): told to the log at warn, the
 * first at once and then at most once a minute, each line naming the methods so called since the
 * last one and how often.
 */
export class TokenlessCalls {
  private readonly pending = new Map<string, number>();
  private loggedAt = -Infinity;

  constructor(
    private readonly log: Pick<Logger, 'warn'>,
    private readonly everyMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  heard(method: string): void {
    this.pending.set(method, (this.pending.get(method) ?? 0) + 1);
    if (this.now() - this.loggedAt < this.everyMs) return;
    this.loggedAt = this.now();
    const methods = [...this.pending].map(([m, n]) => `${m} (${n})`).join(', ');
    this.pending.clear();
    this.log.warn(
      `took calls without the internal token (${INTERNAL_TOKEN_HEADER}), as NEATROOTS_INTERNAL_TOKEN_REQUIRED=false allows: ${methods}. ` +
        'A service of a build before the internal token still calls this one; once every service runs this build, set NEATROOTS_INTERNAL_TOKEN_REQUIRED=true (the default) so that such calls are refused',
      { tokenlessCalls: methods },
    );
  }
}

/**
 * A service implementation whose every method first checks the token: unary and client-streaming
 * calls are answered UNAUTHENTICATED through their callback, streaming ones with an error event.
 * With `required: false` (NEATROOTS_INTERNAL_TOKEN_REQUIRED=false, for a rolling upgrade from a
 * build that sends no token) a call carrying no token is taken and told to `tokenless` with the
 * method's name (`service/method`); a call carrying another token is refused all the same.
 */
export function requireInternalToken(
  impl: UntypedServiceImplementation,
  token: string | undefined,
  opts: { required?: boolean; service?: string; tokenless?: Pick<TokenlessCalls, 'heard'> } = {},
): UntypedServiceImplementation {
  if (!token) return impl;
  const required = opts.required ?? true;
  const refusal = (metadata: Metadata) => {
    const details = metadata.get(INTERNAL_TOKEN_HEADER).length
      ? `${REFUSED}: the call carried an internal token (${INTERNAL_TOKEN_HEADER}) that does not match this service's NEATROOTS_INTERNAL_TOKEN; give every service the same one`
      : `${REFUSED}: the call carried no internal token (${INTERNAL_TOKEN_HEADER}); set NEATROOTS_INTERNAL_TOKEN on the calling service to this one's`;
    return Object.assign(new Error(details), { code: Status.UNAUTHENTICATED, details });
  };
  const out: UntypedServiceImplementation = {};
  for (const [name, fn] of Object.entries(impl)) {
    const method = fn as (call: { metadata: Metadata; emit(e: string, v: unknown): void }, callback?: (err: unknown) => void) => unknown;
    const methodName = opts.service ? `${opts.service}/${name}` : name;
    out[name] = ((call: { metadata: Metadata; emit(e: string, v: unknown): void }, callback?: (err: unknown) => void) => {
      if (hasInternalToken(call.metadata, token)) return method(call, callback);
      if (!required && !call.metadata.get(INTERNAL_TOKEN_HEADER).length) {
        opts.tokenless?.heard(methodName);
        return method(call, callback);
      }
      if (typeof callback === 'function') return callback(refusal(call.metadata));
      call.emit('error', refusal(call.metadata));
    }) as UntypedServiceImplementation[string];
  }
  return out;
}

/** Statuses that may be the client's own (no connection, out of time, cancelled): they say nothing of the token. */
const NOT_ANSWERED = new Set([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED]);

/**
 * Whether another service takes this process's calls or refuses them for the internal token (a
 * NEATROOTS_INTERNAL_TOKEN that differs from that service's, or none): every call through
 * clients made with internalClientOptions(token, watch) tells it. Refused, this process cannot
 * do its work (ingest checks no key, the api answers no request), so it is not ready (`ready()`
 * throws, naming the variable, and /readyz answers 503 with it) until a call is taken again.
 * Before traffic comes (a process just started gets none until it is ready), `probe` makes a
 * call: whenever readiness is asked and no call was answered for `everyMs`.
 */
export class InternalTokenWatch {
  private refusal: string | undefined;
  private answeredAt = -Infinity;
  private probing: Promise<void> | undefined;
  private readonly everyMs: number;
  private readonly now: () => number;

  constructor(
    private readonly opts: {
      /** The service called, and where (for the message). */
      service: string;
      address: string;
      /** A cheap call to it through a client that tells this watch (its outcome is what the watch hears). */
      probe(): Promise<unknown>;
      everyMs?: number;
      now?: () => number;
    },
  ) {
    this.everyMs = opts.everyMs ?? 10_000;
    this.now = opts.now ?? Date.now;
  }

  /** A call's status (the interceptor of internalClientOptions). */
  heard(code: Status, details: string): void {
    if (isInternalTokenRefusal(code, details)) this.refusal = details;
    else if (!NOT_ANSWERED.has(code) && code !== Status.UNAUTHENTICATED) this.refusal = undefined;
    else return;
    this.answeredAt = this.now();
  }

  /** The refusal, when the last call answered was refused for the token. */
  refused(): string | undefined {
    return this.refusal;
  }

  /**
   * Readiness: true, or throws while the service refuses this process's calls. Probes first when
   * no call was answered lately, waiting at most `waitMs` for it (a probe's timeout is short).
   */
  async ready(waitMs = 1_000): Promise<boolean> {
    if (!this.probing && this.now() - this.answeredAt >= this.everyMs) {
      this.probing = this.opts.probe().then(
        () => undefined,
        () => undefined,
      );
      void this.probing.finally(() => (this.probing = undefined));
    }
    if (this.probing) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.probing, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    }
    const refusal = this.refusal;
    if (refusal) throw new Error(`the ${this.opts.service} service (${this.opts.address}) refuses this process's calls: ${refusal}${refusal.includes('NEATROOTS_INTERNAL_TOKEN') ? '' : ' (NEATROOTS_INTERNAL_TOKEN)'}`);
    return true;
  }
}
