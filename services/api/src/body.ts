import { HttpStatus } from '@nestjs/common';
import { json, text } from 'body-parser';
import { ApiError } from './errors';

/**
 * Request bodies: JSON only, at most MAX_BODY_BYTES. Every failure is an ApiError, so it
 * leaves in the API's error shape with a status that says whose fault it is (body-parser's
 * own errors are not Nest exceptions: a body over the limit used to answer 500).
 */

/** The largest body accepted. The biggest body an endpoint takes is a dismissal's 10,000-character note. */
export const MAX_BODY_BYTES = 100 * 1024;

/** What the middleware uses of an express request and response (@types/express is not installed). */
interface BodyRequest {
  method: string;
  headers: Record<string, string | string[] | undefined>;
}
type Next = (err?: unknown) => void;

function hasBody(req: BodyRequest): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

/** The JSON parser refused valid JSON that is not an object or array (a top-level "x", 1 or null: it is strict). */
function jsonButNotObject(err: unknown): boolean {
  const raw = (err as { body?: unknown }).body;
  if (typeof raw !== 'string') return false;
  try {
    const v: unknown = JSON.parse(raw);
    return v === null || typeof v !== 'object';
  } catch {
    return false;
  }
}

/** body-parser's error (an http-errors object) as the API's own; anything else unchanged. */
function bodyError(err: unknown): unknown {
  const e = err as { type?: string; status?: number; limit?: number; message?: string };
  switch (e.type) {
    case 'entity.too.large':
      return new ApiError(HttpStatus.PAYLOAD_TOO_LARGE, 'payload_too_large', `the body is larger than ${e.limit ?? MAX_BODY_BYTES} bytes, the most this API takes`);
    case 'entity.parse.failed':
      return ApiError.badRequest('invalid_body', jsonButNotObject(err) ? 'the body must be a JSON object' : `the body is not valid JSON: ${e.message ?? 'unreadable'}`);
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return new ApiError(HttpStatus.UNSUPPORTED_MEDIA_TYPE, 'unsupported_media_type', e.message ?? 'unsupported body encoding');
    default:
      if (typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
        return new ApiError(e.status, 'invalid_body', `the body could not be read: ${e.message ?? 'unknown reason'}`);
      }
      return err;
  }
}

/**
 * The bodies an endpoint may take beyond the default: a procedure file saved at head is text
 * (Markdown or YAML, as it lives in the team's repository); a session or a whole procedures
 * folder is JSON larger than a dismissal's note. Matched on method and path before any parser
 * runs; everything else is JSON up to MAX_BODY_BYTES.
 */
export interface BodyRule {
  method: string;
  path: RegExp;
  /** text: the body arrives as a string (text/plain, text/markdown, text/yaml); json: parsed. */
  kind: 'json' | 'text';
  limit: number;
}

/**
 * A request to the MCP endpoint (POST /v1/mcp): a JSON-RPC message around a tool call's
 * arguments, each of which may have up to MAX_BODY_BYTES (tools.ts MAX_ARGUMENT_BYTES, checked
 * with the argument named). A few arguments at that bound, JSON-escaped, fit.
 */
export const MCP_BODY_BYTES = 1024 * 1024;

export const BODY_RULES: readonly BodyRule[] = [
  { method: 'POST', path: /^\/v1\/mcp\/?$/i, kind: 'json', limit: MCP_BODY_BYTES },
  // Case-insensitive, as express routes (/v1/Workspaces/w/sessions is the sessions endpoint).
  { method: 'PUT', path: /^\/v1\/workspaces\/[^/]+\/head\/.+/i, kind: 'text', limit: 256 * 1024 },
  { method: 'PUT', path: /^\/v1\/workspaces\/[^/]+\/head\/?$/i, kind: 'json', limit: 16 * 1024 * 1024 },
  { method: 'POST', path: /^\/v1\/workspaces\/[^/]+\/sessions\/?$/i, kind: 'json', limit: 8 * 1024 * 1024 },
];

/**
 * The path a request is routed by, to match it as express does before the body is read: its
 * pathname (req.path, without the query or a fragment, also for a request target in absolute
 * form, `POST http://host/v1/...`), not its raw URL. Paths are matched case-insensitively, as
 * express routes them.
 */
export function routedPath(req: { path?: string; url?: string; originalUrl?: string }): string {
  return req.path ?? (req.originalUrl ?? req.url ?? '').split(/[?#]/)[0];
}

/** The types a file saved at head may be sent as (PUT /head/{path}): the check and its refusals both read this list. */
export const TEXT_TYPES = ['text/plain', 'text/markdown', 'text/x-markdown', 'text/yaml', 'text/x-yaml'] as const;
const TEXT_TYPE = new RegExp(`^(${TEXT_TYPES.join('|')})\\s*(;|$)`, 'i');
/** What a refusal says a file saved at head is: "the file's text (Content-Type: text/plain, ... or text/x-yaml)". */
export const FILE_TEXT_BODY = `the file's text (Content-Type: ${TEXT_TYPES.slice(0, -1).join(', ')} or ${TEXT_TYPES[TEXT_TYPES.length - 1]})`;

/** The rule of this request, or the default (JSON, MAX_BODY_BYTES). */
export function bodyRuleOf(req: { method: string; path?: string; url?: string; originalUrl?: string }): BodyRule {
  const path = routedPath(req);
  return BODY_RULES.find((r) => r.method === req.method && r.path.test(path)) ?? { method: req.method, path: /.*/, kind: 'json', limit: MAX_BODY_BYTES };
}

/**
 * Before the parsers: a body of a type the endpoint does not read is a 415. Left unparsed it
 * would read as no body, and its fields would be silently lost (a dismissal's note sent as a
 * form).
 */
export function requireJsonBody(req: BodyRequest & { path?: string; url?: string; originalUrl?: string }, _res: unknown, next: Next): void {
  if (!hasBody(req)) return next();
  const type = req.headers['content-type'];
  const rule = bodyRuleOf(req);
  if (rule.kind === 'text') {
    if (typeof type === 'string' && TEXT_TYPE.test(type)) return next();
    return next(new ApiError(HttpStatus.UNSUPPORTED_MEDIA_TYPE, 'unsupported_media_type', `the body is ${FILE_TEXT_BODY}, got ${type ?? 'no Content-Type'}`));
  }
  if (typeof type === 'string' && JSON_TYPE.test(type)) return next();
  next(new ApiError(HttpStatus.UNSUPPORTED_MEDIA_TYPE, 'unsupported_media_type', `the body must be JSON (Content-Type: application/json), got ${type ?? 'no Content-Type'}`));
}

type Parser = ReturnType<typeof json>;
const parsers = new Map<string, Parser>();

/** One parser per kind and limit, made once: what the request's rule reads its body with. */
function parserFor(rule: BodyRule): Parser {
  const key = `${rule.kind}:${rule.limit}`;
  let p = parsers.get(key);
  if (!p) {
    p = rule.kind === 'text' ? text({ limit: rule.limit, type: () => true }) : json({ limit: rule.limit, type: () => true });
    parsers.set(key, p);
  }
  return p;
}

/** After requireJsonBody: reads the body as its endpoint's rule says (text or JSON, and its limit). */
export function parseBody(req: BodyRequest & { path?: string; url?: string; originalUrl?: string }, res: unknown, next: Next): void {
  if (!hasBody(req)) return next();
  parserFor(bodyRuleOf(req))(req, res, next);
}

/**
 * After the JSON parser (an express error handler: four arguments): its errors become the
 * API's own before Nest sees them, which would keep only the message of an unparsable body
 * and answer 500 for one over the limit.
 */
export function bodyParserErrors(err: unknown, _req: BodyRequest, _res: unknown, next: Next): void {
  next(err instanceof ApiError ? err : bodyError(err));
}
