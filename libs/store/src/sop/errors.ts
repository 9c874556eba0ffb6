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
  ) {
    super(message);
    this.name = 'SopError';
  }
}

export function doesNotCompile(what: string, issues: Issue[]): SopError {
  const first = issues.slice(0, 3).map((i) => `${i.file}:${i.line}: ${i.message}`).join('; ');
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : '';
  return new SopError(422, 'does_not_compile', `${what} would not compile: ${first}${more}`, issues);
}
