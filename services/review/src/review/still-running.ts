import { JobTimeoutError } from '@neatroots/ports';
import { SopError } from '@neatroots/store';

/**
 * A request that waits for its job (recluster, calibrate): when the job outlives the wait, the
 * job goes on, and the answer says so (504 still_running) rather than a bare internal error.
 */
export async function waitedFor<R>(what: string, waitMs: number, after: string, run: (waitMs: number) => Promise<R>): Promise<R> {
  try {
    return await run(waitMs);
  } catch (err) {
    if (!(err instanceof JobTimeoutError)) throw err;
    const waited = waitMs >= 60_000 ? `${Math.round(waitMs / 60_000)} minutes` : waitMs >= 1_000 ? `${Math.round(waitMs / 1_000)} s` : `${waitMs} ms`;
    throw new SopError(504, 'still_running', `${what} is still running after ${waited}: it goes on; ${after}`);
  }
}
