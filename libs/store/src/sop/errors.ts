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

export function doesNotCompile(what: string, issues: Issue[]): SopError {
  const first = issues.slice(0, 3).map((i) => `${i.file}:${i.line}: ${i.message}`).join('; ');
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : '';
  let bytes = 2;
  let kept = 0;
  while (kept < issues.length) {
    const size = Buffer.byteLength(JSON.stringify(issues[kept])) + 1;
    if (bytes + size > ISSUES_BYTES) break;
    bytes += size;
    kept++;
  }
  const omitted = issues.length - kept;
  return new SopError(422, 'does_not_compile', `${what} would not compile: ${first}${more}`, issues.slice(0, kept), omitted || undefined);
}
