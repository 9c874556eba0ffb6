/** A malformed span or run event: says which field is wrong and why. */
export class SpanValidationError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
    readonly run_id?: string,
    readonly span_id?: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = 'SpanValidationError';
  }
}
