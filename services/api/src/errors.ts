import { status as GrpcStatus } from '@grpc/grpc-js';
import { ArgumentsHost, Catch, HttpException, HttpStatus, Logger as NestLogger, type ExceptionFilter } from '@nestjs/common';
import { RepeatedErrors, type Logger } from '@neatroots/ports';
import { SopError, StoreInputError, type SopIssue } from '@neatroots/store';
import { AuthoringError, type CheckProblem } from './authoring';

/** What the filter uses of an express request and response (@types/express is not installed). */
interface Request {
  method?: string;
  path?: string;
}

interface JsonResponse {
  headersSent: boolean;
  setHeader(name: string, value: string): unknown;
  status(code: number): { json(body: unknown): unknown };
}

/**
 * The one error shape of the API, whatever the status: `{ "error": { "code", "message" } }`,
 * with sopc's `issues` when a procedures folder would not compile (422).
 */
export interface ErrorBody {
  error: { code: string; message: string; issues?: SopIssue[]; issues_omitted?: number; problems?: CheckProblem[] };
}

export function errorBody(code: string, message: string, issues?: SopIssue[], problems?: CheckProblem[], issuesOmitted?: number): ErrorBody {
  return { error: { code, message, ...(issues ? { issues } : {}), ...(issuesOmitted ? { issues_omitted: issuesOmitted } : {}), ...(problems ? { problems } : {}) } };
}

/** An error the API answers with its own code: `{ "error": { "code", "message" } }`. */
export class ApiError extends HttpException {
  constructor(
    status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(errorBody(code, detail), status);
  }

  static badRequest(code: string, message: string): ApiError {
    return new ApiError(HttpStatus.BAD_REQUEST, code, message);
  }

  static notFound(message: string): ApiError {
    return new ApiError(HttpStatus.NOT_FOUND, 'not_found', message);
  }

  /**
   * A part this api is not set up to serve (no review side, no question service, no authoring
   * side in its configuration): 503 `not_served`, with no Retry-After, as asking again gets the
   * same until the api's settings change. Not `unavailable`, which says a service is away a
   * moment and carries Retry-After: a client that retries those would retry this for ever.
   */
  static notServed(message: string): ApiError {
    return new ApiError(HttpStatus.SERVICE_UNAVAILABLE, NOT_SERVED, message);
  }
}

/** The code of a part this api is not set up to serve (ApiError.notServed): never with Retry-After. */
export const NOT_SERVED = 'not_served';

/**
 * A service the api asks over gRPC (review or question, in the distributed deployment) cannot be
 * reached, or refuses the api's calls for NEATROOTS_INTERNAL_TOKEN: 503
 * `unavailable` with Retry-After, logged as one warning line. The service restarting (a rollout,
 * a crash) is not a fault of the request nor of the api.
 */
export class UnavailableError extends Error {
  override readonly name = 'UnavailableError';
}

/**
 * A service the api asks over gRPC answered more than the api takes in one reply (gRPC
 * RESOURCE_EXHAUSTED, "Received message larger than max"): 502 `answer_too_large`, logged as
 * one warning line. Not a service away: asking again gets the same answer, so no Retry-After.
 */
export class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError';
}

/**
 * A service the api asks over gRPC is of an earlier version than the api and has not the method
 * asked (gRPC UNIMPLEMENTED, "The server does not implement the method /neatroots.v1.Sop/
 * RecheckSession"): 501 `not_implemented`, naming the service and the method, logged as one
 * warning line. Asking again gets the same until that service is upgraded, so no Retry-After.
 */
export class NotImplementedError extends Error {
  override readonly name = 'NotImplementedError';
}

/**
 * A service the api asks over gRPC took longer than the api waits for the call (gRPC
 * DEADLINE_EXCEEDED): 504 `review_timeout` (`<service>_timeout`), logged as one warning line.
 * Not a service away for a moment: the same request asked again is likely as slow, so no
 * Retry-After and no "retry shortly" (a 503 had both, and clients asked again at once).
 */
export class ServiceTimeoutError extends Error {
  override readonly name = 'ServiceTimeoutError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The method grpc-js names in an UNIMPLEMENTED answer: `/package.Service/Method`, or the implementation's key. */
const UNIMPLEMENTED_METHOD = /does not implement the method (?:\/[\w.]+\/)?(\w+)/;

/** grpc-js's words for a message over its size limit (as opposed to a server's back-pressure). */
const SIZE_LIMIT = /larger than max/i;

/** What `unavailable` reads of a failed gRPC call: grpc-js's ServiceError, or a client's error that kept its status. */
export type CallStatus = { code: number; details?: string; message: string };

/** The errors `unavailable` answers a failed call with. */
export type ServiceCallError = UnavailableError | AnswerTooLargeError | NotImplementedError | ServiceTimeoutError;

/** A deadline in words: 10 s, 1.5 s, 250 ms. */
const seconds = (ms: number) => (ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`);

/**
 * A failed call to another service of the deployment (`service`: review, question) that is not
 * the request's fault, as the api answers it: 503 with Retry-After (UnavailableError), not a
 * 500. The service not there (restarting, overloaded), or refusing this
 * process's calls for the deployment's internal token (UNAUTHENTICATED: those ports take no
 * other key; NEATROOTS_INTERNAL_TOKEN differs between the services, a misconfiguration the
 * message names). An answer over the gRPC message limit is no such thing: AnswerTooLargeError,
 * not to be retried (RESOURCE_EXHAUSTED stays a service's back-pressure otherwise, as the
 * question service's full queue). Nor is a method the service has not (UNIMPLEMENTED: the api
 * upgraded before it): NotImplementedError, naming the service and the method. Nor is a call that
 * took longer than its deadline (`deadlineMs`, when the caller knows it): ServiceTimeoutError,
 * 504, the same request likely as slow again. Anything else: undefined.
 */
export function unavailable(err: CallStatus, service = 'review', deadlineMs?: number): ServiceCallError | undefined {
  if (err.code === GrpcStatus.UNIMPLEMENTED) {
    const details = err.details || err.message;
    const method = UNIMPLEMENTED_METHOD.exec(details)?.[1];
    const what = method ? `has no ${method[0].toUpperCase()}${method.slice(1)}` : `does not implement this call (UNIMPLEMENTED: ${details})`;
    return new NotImplementedError(`the ${service} service is of an earlier version and ${what}: upgrade ${service}`);
  }
  if (err.code === GrpcStatus.RESOURCE_EXHAUSTED && SIZE_LIMIT.test(err.details || err.message)) {
    return new AnswerTooLargeError(
      `the ${service} service's answer is too large to pass to this process (RESOURCE_EXHAUSTED: ${err.details || err.message}); asking again gets the same: ask for less where the call takes a limit`,
    );
  }
  if (err.code === GrpcStatus.UNAUTHENTICATED) {
    const details = err.details || err.message;
    return new UnavailableError(`the ${service} service refuses this process's calls, a misconfiguration: ${details}${details.includes('NEATROOTS_INTERNAL_TOKEN') ? '' : ' (NEATROOTS_INTERNAL_TOKEN)'}`);
  }
  // Past the deadline still waiting for a connection (grpc-js says what it waited for, and names
  // the service's address only once the call was sent): the service is away, not slow. The
  // service's own plain "Deadline exceeded" (its timer fired before ours) means it had the call: slow.
  const waited = err.code === GrpcStatus.DEADLINE_EXCEEDED && /waiting for (LB pick|name resolution)/i.test(err.details || err.message) && !/remote_addr=/.test(err.details || err.message);
  if (err.code === GrpcStatus.DEADLINE_EXCEEDED && !waited) {
    const took = deadlineMs === undefined ? 'longer than this process waits' : `more than ${seconds(deadlineMs)}`;
    return new ServiceTimeoutError(
      `${service}_timeout`,
      `the ${service} service took ${took} for this request (DEADLINE_EXCEEDED: ${err.details || err.message}); the same request asked again is likely as slow: ask for less where the call takes a limit`,
    );
  }
  if (err.code !== GrpcStatus.UNAVAILABLE && err.code !== GrpcStatus.RESOURCE_EXHAUSTED && !waited) return undefined;
  return new UnavailableError(`the ${service} service cannot answer right now (${GrpcStatus[err.code]}: ${err.details || err.message}); retry shortly`);
}

/**
 * The error of a client of another service that keeps the call's gRPC status and names the
 * service (`service`: review's ReviewDataClient, whose ReviewServiceError the authoring
 * endpoints see), answered as `unavailable` answers that status; one of unavailable's errors as
 * it is; undefined for anything else.
 */
export function unavailableOf(err: unknown): ServiceCallError | undefined {
  if (err instanceof NotImplementedError || err instanceof ServiceTimeoutError) return err;
  const e = err as { code?: unknown; details?: unknown; message?: unknown; service?: unknown } | null;
  if (!e || typeof e !== 'object' || typeof e.service !== 'string' || typeof e.code !== 'number' || typeof e.details !== 'string') return undefined;
  return unavailable({ code: e.code, details: e.details, message: typeof e.message === 'string' ? e.message : '' }, e.service);
}

/** Nest's own errors (no route, a path that does not decode) by status. */
const CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
  503: 'unavailable',
};

/**
 * Codes that ask the caller to come back shortly, with the seconds they send as Retry-After:
 * a model queue that is full (a draft refused by the question service's back-pressure), a
 * service away a moment. Not `not_served` (a part this api is not set up to serve): asking
 * again gets the same.
 */
export const RETRY_AFTER_SECONDS: ReadonlyMap<string, number> = new Map([
  ['model_busy', 5],
  ['unavailable', 5],
]);

function messageOf(e: HttpException): string {
  const body = e.getResponse();
  if (typeof body === 'string') return body;
  const m = (body as { message?: unknown }).message;
  if (Array.isArray(m)) return m.join('; ');
  return typeof m === 'string' ? m : e.message;
}

/** The times grpc-js puts in its connection errors: one failure, whenever it came, is one. */
const TIMES = / ?\(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g;

/**
 * Every error leaves as JSON `{ "error": { "code": ..., "message": ... } }`: the API's own
 * errors, Nest's (unknown route, unparsable body), the store's bad-argument errors (400), and
 * anything unexpected (500, logged; its message is not shown). What is logged (a 503's cause at
 * warn, a 500's fault at error) goes through the service's logger: each failure once, then at
 * most every 30 s with how many were not (a review service away fails every request alike).
 */
@Catch()
export class ErrorsFilter implements ExceptionFilter {
  private readonly repeats = new RepeatedErrors();

  /** `log`: the service's logger; absent, Nest's (an app made without one). */
  constructor(private readonly log?: Logger) {}

  private warn(message: string): void {
    const quiet = this.repeats.pass(`warn: ${message.replace(TIMES, '')}`);
    if (quiet === undefined) return;
    if (this.log) this.log.warn(`${message}${RepeatedErrors.suffix(quiet)}`);
    else new NestLogger('api').warn(message);
  }

  private fault(req: Request, err: unknown): void {
    const quiet = this.repeats.pass(`error: ${(err instanceof Error ? err.message : String(err)).replace(TIMES, '')}`);
    if (quiet === undefined) return;
    const what = `api: unexpected error answering ${req.method ?? '?'} ${req.path ?? '?'} (500 internal)${RepeatedErrors.suffix(quiet)}`;
    if (this.log) this.log.error(what, err);
    else new NestLogger('api').error(err instanceof Error ? err.stack ?? err.message : String(err));
  }

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<JsonResponse>();
    const req = host.switchToHttp().getRequest<Request>();
    let status: number;
    let code: string;
    let message: string;
    let issues: SopIssue[] | undefined;
    let issuesOmitted: number | undefined;
    let problems: CheckProblem[] | undefined;
    let down: ServiceCallError | undefined;
    if (err instanceof ApiError) {
      status = err.getStatus();
      code = err.code;
      message = err.detail;
    } else if (err instanceof SopError) {
      status = err.status;
      code = err.code;
      message = err.message;
      issues = err.issues;
      issuesOmitted = err.issuesOmitted;
    } else if (err instanceof AuthoringError) {
      // A check that does not validate names each field (and its YAML line); a refusal says why.
      status = err.status;
      code = err.code;
      message = err.message;
      problems = err.problems;
    } else if (err instanceof UnavailableError || err instanceof AnswerTooLargeError || (down = unavailableOf(err))) {
      const other = down ?? (err as UnavailableError | AnswerTooLargeError);
      const tooLarge = other instanceof AnswerTooLargeError;
      const older = other instanceof NotImplementedError;
      const slow = other instanceof ServiceTimeoutError ? other : undefined;
      status = tooLarge ? HttpStatus.BAD_GATEWAY : older ? HttpStatus.NOT_IMPLEMENTED : slow ? HttpStatus.GATEWAY_TIMEOUT : HttpStatus.SERVICE_UNAVAILABLE;
      code = tooLarge ? 'answer_too_large' : older ? 'not_implemented' : slow ? slow.code : 'unavailable';
      message = other.message;
      this.warn(message);
    } else if (err instanceof StoreInputError) {
      status = HttpStatus.BAD_REQUEST;
      code = err.code;
      message = err.message;
    } else if (err instanceof HttpException) {
      status = err.getStatus();
      code = CODES[status] ?? (status >= 500 ? 'internal' : 'error');
      message = messageOf(err);
    } else {
      status = HttpStatus.INTERNAL_SERVER_ERROR;
      code = 'internal';
      message = 'internal error';
      this.fault(req, err);
    }
    if (res.headersSent) return;
    const retryAfter = RETRY_AFTER_SECONDS.get(code);
    if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
    res.status(status).json(errorBody(code, message, issues, problems, issuesOmitted));
  }
}
