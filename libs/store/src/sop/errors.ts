import type { Issue } from '@neatroots/sop';

/** One of sopc's errors: FILE (relative to the folder), LINE, message. */
export type SopIssue = Issue;

/**
 * What the SOP side refuses, with the status each transport answers: the api maps `status` to
 * HTTP, the gRPC server to a gRPC code (and back on the client side), so a refusal reads the
 * same in both deployments.
 */
export class SopError extends Error {
  constructor(
    /** 400 bad input, 404 not found, 409 conflict, 422 does not compile, 504 still running (a job the request waited for goes on). */
    readonly status: 400 | 404 | 409 | 422 | 504,
    readonly code: string,
    message: string,
    /** sopc's errors, for 422 does_not_compile. */
    readonly issues?: Issue[],
    /** sopc's errors left out of `issues` (past ISSUES_BYTES). */
    readonly issuesOmitted?: number,
  ) {
    super(message);
    this.name = 'SopError';
  }
}

/**
 * How much of sopc's errors a refusal carries, as JSON: the first ones that fit, the rest counted.
 * Between services they travel in a gRPC trailer, and HTTP/2 caps a header list at 64 KiB (past
 * it the call never ended, and the api answered 504 after its deadline).
 */
export const ISSUES_BYTES = 32 * 1024;

/**
 * JSON in printable ASCII (each other character as its \u escape): what a gRPC metadata value
 * may hold. grpc-js throws on anything else, and that refusal then never came back at all.
 * ISSUES_BYTES measures issues this way (never fewer bytes than their UTF-8 JSON).
 */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * How much of one user-given text (the `what`, each of the first errors) the refusal's message
 * shows. The message travels as the gRPC status's details (a header too), and sopc's errors
 * echo what they refuse (`unknown section "<the whole line>"`, a file holds up to 256 KiB), so
 * the message is kept to a few hundred characters a part; the issues carry more of each error.
 */
export const MESSAGE_PART_CHARS = 300;

/** How much of one of sopc's errors `issues` shows, so that a lone error echoing a huge line still fits in ISSUES_BYTES. */
export const ISSUE_MESSAGE_CHARS = 1000;

function clip(text: string, max = MESSAGE_PART_CHARS): string {
  if (text.length <= max) return text;
  const chars = [...text];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : text;
}

export function doesNotCompile(what: string, all: Issue[]): SopError {
  const issues = all.map((i) => (i.message.length > ISSUE_MESSAGE_CHARS ? { ...i, message: clip(i.message, ISSUE_MESSAGE_CHARS) } : i));
  const first = issues.slice(0, 3).map((i) => clip(`${i.file}:${i.line}: ${i.message}`)).join('; ');
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : '';
  let bytes = 2;
  let kept = 0;
  while (kept < issues.length) {
    const size = asciiJson(issues[kept]).length + 1;
    if (bytes + size > ISSUES_BYTES) break;
    bytes += size;
    kept++;
  }
  const omitted = issues.length - kept;
  return new SopError(422, 'does_not_compile', `${clip(what)} would not compile: ${first}${more}`, issues.slice(0, kept), omitted || undefined);
}
