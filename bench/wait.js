'use strict';
// Waiting in the benches, never forever: a service that stalls (a consumer stuck, a process
// stopped, a database that no longer answers) ends the bench with what was done of what, and a
// non-zero exit, instead of a bench that prints nothing for ever.

/**
 * How long a phase of `spans` spans may take before the bench gives up: generous, a minute plus
 * 5 ms a span (200 spans/s, a tenth of the slowest sitting's rate); BENCH_DEADLINE_S (seconds)
 * sets it instead.
 */
function deadlineMs(spans) {
  const s = process.env.BENCH_DEADLINE_S;
  if (s !== undefined && s !== '') {
    if (!(Number(s) > 0)) throw new Error(`BENCH_DEADLINE_S: a number of seconds over 0, not '${s}'`);
    return Number(s) * 1000;
  }
  return 60_000 + spans * 5;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The error a deadline ends a wait with: what was done of what, and after how long. */
class DeadlineError extends Error {}

/**
 * Polls `check()` every `everyMs` until it resolves to { done: true }; its `state` says how far it
 * got. A check that fails is tried again. Rejects once `ms` have passed (with `what`, the last
 * state, and why the last check failed if it did), or as soon as `signal` aborts.
 */
async function waitUntil(what, check, { ms, everyMs = 100, signal } = {}) {
  const t0 = Date.now();
  let state = 'nothing read';
  for (;;) {
    signal?.throwIfAborted();
    let failed;
    try {
      const r = await check();
      if (r.done) return r;
      state = r.state;
    } catch (e) {
      signal?.throwIfAborted();
      failed = e;
    }
    if (Date.now() - t0 >= ms) {
      const err = new DeadlineError(`${what}: ${state} after ${Math.round((Date.now() - t0) / 1000)} s, the deadline (BENCH_DEADLINE_S to change it); giving up`);
      if (failed) err.message += `; the last read failed: ${failed.message}`;
      throw err;
    }
    await sleep(everyMs);
  }
}

/**
 * Polls `read()` (a number, or a promise of one) every `everyMs` until it reaches `target`, and
 * resolves to it. A read that fails (a service too busy to answer in time) is tried again. Rejects
 * once `ms` have passed (saying what `read()` last gave of `target`, and why the last read failed
 * if it did), or as soon as `signal` aborts (with its reason: a service that exited, an interrupt).
 */
async function waitFor(what, read, target, opts = {}) {
  const r = await waitUntil(what, async () => {
    const n = await read();
    return { done: n >= target, n, state: `${n} of ${target}` };
  }, opts);
  return r.n;
}

/**
 * `promise`, or a rejection once `ms` have passed: `what()` says what was still left then (read
 * at that moment: a backlog, a count).
 */
async function within(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const left = what();
      reject(new DeadlineError(`${left} after ${Math.round(ms / 1000)} s, the deadline (BENCH_DEADLINE_S to change it); giving up`));
    }, ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

module.exports = { deadlineMs, waitFor, waitUntil, within, DeadlineError };
