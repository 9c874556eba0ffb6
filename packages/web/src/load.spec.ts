/** What this spec calls of app/api.ts and app/load.ts. */
interface Failure {
  new (status: number, code: string, message: string): Error;
}
// Loaded by jest, not seen by the specs' typecheck: app/ is the browser's code (window,
// sessionStorage), which the specs' tsconfig does not type.
const { ApiFailure } = jest.requireActual<{ ApiFailure: Failure }>('../app/api');
const { passing } = jest.requireActual<{ passing: (err: unknown) => boolean }>('../app/load');

describe('passing: which failures a page reads again by itself', () => {
  it("reads again a 503 the api says will pass, and a proxy's 503 with no body of ours", () => {
    // The review service away a moment: the api's unavailable (sent with Retry-After).
    expect(passing(new ApiFailure(503, 'unavailable', 'the review service is unavailable'))).toBe(true);
    // An ingress in front of the api while its pod restarts: no JSON error, no Retry-After.
    expect(passing(new ApiFailure(503, 'http_503', '503 Service Unavailable'))).toBe(true);
  });

  it('does not read again a part this api is not set up to serve, nor other failures', () => {
    expect(passing(new ApiFailure(503, 'not_served', 'review (patterns, verdicts, insights) is not served by this api'))).toBe(false);
    expect(passing(new ApiFailure(500, 'internal', 'boom'))).toBe(false);
    expect(passing(new ApiFailure(504, 'review_timeout', 'slow'))).toBe(false);
    expect(passing(new Error('network'))).toBe(false);
  });
});
