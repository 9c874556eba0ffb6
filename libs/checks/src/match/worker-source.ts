/**
 * The matcher thread's code. It is handed to `new Worker(..., { eval: true })` as text so
 * the same thing runs from the built package, from ts sources under jest, and from a bundle:
 * there is no second file whose path would have to be found at run time.
 *
 * Protocol (one batch at a time): the main thread sends the batch's distinct patterns, its
 * texts as one transferred buffer with offsets, the jobs (pattern index, text index), the
 * limit, and a SharedArrayBuffer. The thread writes into that shared memory as it goes:
 * which job it is on, when that job started, and each job's result. So when the main thread
 * has to terminate it mid-call (RE2 cannot be interrupted), every answer already found is
 * kept, and the job that ran out of time is known.
 *
 * Shared layout: Int32 [0] job being run, [1] its strike (0 first run, 1 second run),
 * [2] jobs done; Float64 at byte 16: when the current run started (timeOrigin + now: each
 * thread has its own time origin), 0 when idle; Int8 results per job from byte 32 (see
 * RESULT); Float64 ms per job after them.
 */
export const RESULT = { pending: 0, miss: 1, hit: 2, slow: 3, skipped: 4 } as const;

export function sharedLayout(jobs: number): { bytes: number; resultsAt: number; msAt: number } {
  const resultsAt = 32;
  const msAt = Math.ceil((resultsAt + jobs) / 8) * 8;
  return { bytes: msAt + jobs * 8, resultsAt, msAt };
}

export const WORKER_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const RE2 = require(workerData.re2);
const compiled = new Map();
function compile(p) {
  let re = compiled.get(p);
  if (!re) {
    if (compiled.size > 1000) compiled.clear();
    re = new RE2(p);
    compiled.set(p, re);
  }
  return re;
}
parentPort.on('message', (m) => {
  const ctl = new Int32Array(m.shared, 0, 4);
  const clock = new Float64Array(m.shared, 16, 1);
  const origin = performance.timeOrigin;
  const results = new Int8Array(m.shared, m.resultsAt, m.jobs.length / 2);
  const ms = new Float64Array(m.shared, m.msAt, m.jobs.length / 2);
  const texts = Buffer.from(m.texts);
  // Compiled when first needed: a pattern given up earlier is not compiled again.
  const res = new Array(m.patterns.length);
  const slow = new Set(m.slowPatterns);
  for (let j = m.from; j < results.length; j++) {
    const pi = m.jobs[2 * j];
    if (slow.has(pi)) { results[j] = ${RESULT.skipped}; continue; }
    const ti = m.jobs[2 * j + 1];
    const text = texts.subarray(m.offsets[ti], m.offsets[ti + 1]);
    let strike = j === m.from ? m.strike : 0;
    for (;;) {
      Atomics.store(ctl, 1, strike);
      clock[0] = origin + performance.now();
      Atomics.store(ctl, 0, j);
      const hit = (res[pi] ??= compile(m.patterns[pi])).test(text);
      const took = origin + performance.now() - clock[0];
      ms[j] = took;
      if (took <= m.limitMs) { results[j] = hit ? ${RESULT.hit} : ${RESULT.miss}; break; }
      // Over the limit: wall-clock time on a busy machine can include a pause of this
      // thread, so the same call is timed once more before the pattern is given up.
      if (++strike >= 2) { results[j] = ${RESULT.slow}; slow.add(pi); break; }
    }
    Atomics.store(ctl, 2, j + 1);
  }
  clock[0] = 0;
  parentPort.postMessage(m.id);
});
`;
