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
}

/**
 * A service the api asks over gRPC (review, in the distributed deployment) cannot be reached or
 * gave no answer in time: 503 `unavailable` with Retry-After, logged as one warning line. The
 * service restarting (a rollout, a crash) is not a fault of the request nor of the api.
 */
export class UnavailableError extends Error {
  override readonly name = 'UnavailableError';
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
 * a model queue that is full (a draft refused by the question service's back-pressure).
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
    } else if (err instanceof UnavailableError) {
      status = HttpStatus.SERVICE_UNAVAILABLE;
      code = 'unavailable';
      message = err.message;
      this.warn(err.message);
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
