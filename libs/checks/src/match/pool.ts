import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { RESULT, sharedLayout, WORKER_SOURCE } from './worker-source';

/** One pattern to run over one text. Jobs that share a text should share the Buffer (sent once). */
export interface MatchJob {
  pattern: string;
  text: Buffer;
}

/** A job's answer; `slow`: over the limit twice (the pattern's later jobs in the batch are `skipped`). */
export type MatchOutcome = { hit: boolean } | { slow: number } | { skipped: true };

export interface MatchWorkerOptions {
  /** The hard limit per job, in milliseconds. */
  limitMs: number;
  /** Told when the thread had to be stopped (and a new one started) or died. */
  onEvent?: (event: 'terminated' | 'died', detail: string) => void;
}

type Attempt = { done: true } | { killed: number; strike: number; elapsed: number } | { died: string };

/**
 * Runs RE2 off the main thread, one batch at a time, with a hard time limit per job. RE2
 * cannot be interrupted inside a call, so the limit is kept by a watchdog on this thread:
 * when the worker has been on one job longer than the limit it is terminated (the thread ends
 * when that call returns; nothing waits for it) and a fresh one takes the rest of the batch.
 * A paused thread is not a slow pattern, so a job is `slow` only when it is over the limit
 * twice: a call that finished late is timed again in the thread; a call that had to be stopped
 * is slow if the stopped thread is still on it after twice the limit, else it is tried again.
 * The bounds on patterns (../regex.ts) bound how long a stopped thread can run on.
 */
export class MatchWorker {
  private worker: Worker | undefined;
  private spare: Worker | undefined;
  private readonly gone = new WeakSet<Worker>();
  private queue: Promise<unknown> = Promise.resolve();
  private seq = 0;
  private readonly re2 = require.resolve('re2');
  private closed = false;

  constructor(private readonly opts: MatchWorkerOptions) {}

  /** Answers for every job, in order. Batches run one after another. */
  run(jobs: readonly MatchJob[]): Promise<MatchOutcome[]> {
    const p = this.queue.then(() => this.runBatch(jobs));
    this.queue = p.catch(() => undefined);
    return p;
  }

  async close(): Promise<void> {
    this.closed = true;
    const threads = [this.worker, this.spare];
    this.worker = this.spare = undefined;
    await Promise.all(threads.map((w) => w?.terminate()));
  }

  /**
   * The thread for the next attempt. One more is kept started beside it, so replacing a
   * stopped thread costs nothing (starting one and loading RE2 takes tens of milliseconds,
   * which the rest of the batch would otherwise wait).
   */
  private spawn(): Worker {
    if (this.closed) throw new Error('the matcher thread is closed');
    if (this.spare && this.gone.has(this.spare)) this.spare = undefined;
    if (!this.worker || this.gone.has(this.worker)) {
      this.worker = this.spare ?? this.thread();
      this.spare = undefined;
    }
    this.spare ??= this.thread();
    return this.worker;
  }

  private thread(): Worker {
    const w = new Worker(WORKER_SOURCE, { eval: true, workerData: { re2: this.re2 } });
    // An idle matcher thread must not keep the process alive; a batch in flight keeps its
    // watchdog timer, which does.
    w.unref();
    // A thread stopped mid-batch may still report an error after its batch let go of it.
    w.on('error', () => undefined);
    // One that ended while idle must not be handed a batch (nothing would ever answer).
    w.once('exit', () => this.gone.add(w));
    return w;
  }

  private async runBatch(jobs: readonly MatchJob[]): Promise<MatchOutcome[]> {
    const n = jobs.length;
    if (!n) return [];
    const patterns: string[] = [];
    const patternIndex = new Map<string, number>();
    const texts: Buffer[] = [];
    const textIndex = new Map<Buffer, number>();
    const pairs = new Int32Array(2 * n);
    for (let j = 0; j < n; j++) {
      let pi = patternIndex.get(jobs[j].pattern);
      if (pi === undefined) patternIndex.set(jobs[j].pattern, (pi = patterns.push(jobs[j].pattern) - 1));
      let ti = textIndex.get(jobs[j].text);
      if (ti === undefined) textIndex.set(jobs[j].text, (ti = texts.push(jobs[j].text) - 1));
      pairs[2 * j] = pi;
      pairs[2 * j + 1] = ti;
    }
    const offsets = new Int32Array(texts.length + 1);
    for (let t = 0; t < texts.length; t++) offsets[t + 1] = offsets[t] + texts[t].length;
    const results = new Int8Array(n);
    const ms = new Float64Array(n);

    let from = 0;
    let strike = 0;
    let deaths = 0;
    while (from < n) {
      const slowPatterns = new Set<number>();
      for (let j = 0; j < n; j++) if (results[j] === RESULT.slow) slowPatterns.add(pairs[2 * j]);
      const a = await this.attempt({ n, pairs, patterns, texts, offsets, from, strike, slowPatterns: [...slowPatterns] });
      // Each attempt has its own shared memory: a stopped thread that runs on for a moment
      // after its RE2 call returns writes only into memory nobody reads any more.
      for (let j = from; j < n; j++) {
        if (a.results[j] !== RESULT.pending) {
          results[j] = a.results[j];
          ms[j] = a.ms[j];
        }
      }
      if ('done' in a.end) break;
      if ('killed' in a.end) {
        const j = a.end.killed;
        if (a.end.strike >= 1) {
          results[j] = RESULT.slow;
          ms[j] = a.end.elapsed;
          from = j + 1;
          strike = 0;
        } else {
          from = j;
          strike = 1;
        }
        continue;
      }
      // The thread died on its own (out of memory, a bug): a fresh one goes on where it stopped.
      from = results.indexOf(RESULT.pending);
      if (from < 0) break;
      strike = 0;
      if (++deaths > 2) {
        for (let j = from; j < n; j++) if (results[j] === RESULT.pending) results[j] = RESULT.skipped;
        this.opts.onEvent?.('died', `${a.end.died}; ${n - from} matches skipped`);
        break;
      }
    }
    const out = new Array<MatchOutcome>(n);
    for (let j = 0; j < n; j++) {
      const r = results[j];
      out[j] = r === RESULT.hit || r === RESULT.miss ? { hit: r === RESULT.hit } : r === RESULT.slow ? { slow: ms[j] } : { skipped: true };
    }
    return out;
  }

  private attempt(b: {
    n: number;
    pairs: Int32Array;
    patterns: string[];
    texts: Buffer[];
    offsets: Int32Array;
    from: number;
    strike: number;
    slowPatterns: number[];
  }): Promise<{ end: Attempt; results: Int8Array; ms: Float64Array }> {
    const w = this.spawn();
    const id = ++this.seq;
    // One copy of the texts, moved (not copied again) to the thread. Not from Buffer's shared
    // pool: transferring would take the pool away from every other small Buffer.
    const all = Buffer.allocUnsafeSlow(b.offsets[b.offsets.length - 1]);
    for (let t = 0; t < b.texts.length; t++) b.texts[t].copy(all, b.offsets[t]);
    const layout = sharedLayout(b.n);
    const shared = new SharedArrayBuffer(layout.bytes);
    const ctl = new Int32Array(shared, 0, 4);
    const clock = new Float64Array(shared, 16, 1);
    const results = new Int8Array(shared, layout.resultsAt, b.n);
    const ms = new Float64Array(shared, layout.msAt, b.n);
    const limit = this.opts.limitMs;
    return new Promise((resolve) => {
      const finish = (end: Attempt) => {
        clearInterval(dog);
        w.off('message', onMessage);
        w.off('error', onError);
        w.off('exit', onExit);
        resolve({ end, results, ms });
      };
      const onMessage = (m: unknown) => m === id && finish({ done: true });
      const onError = (err: Error) => {
        if (this.worker === w) this.worker = undefined;
        finish({ died: err.message });
      };
      const onExit = (code: number) => {
        if (this.worker === w) this.worker = undefined;
        finish({ died: `exited with code ${code}` });
      };
      w.on('message', onMessage);
      w.on('error', onError);
      w.on('exit', onExit);
      const dog = setInterval(
        () => {
          const job = Atomics.load(ctl, 0);
          const strike = Atomics.load(ctl, 1);
          const start = clock[0];
          if (!start) return;
          const elapsed = performance.timeOrigin + performance.now() - start;
          if (elapsed <= limit) return;
          // Stopped, not awaited: the thread ends when RE2 returns; the rest goes to a new one.
          clearInterval(dog);
          w.off('exit', onExit);
          this.worker = undefined;
          void w.terminate();
          this.opts.onEvent?.('terminated', `a match ran ${elapsed.toFixed(0)} ms (limit ${limit} ms)`);
          if (strike >= 1) return finish({ killed: job, strike, elapsed });
          // A first time over may be a pause of the thread, not the pattern. Rather than run the
          // call again (a second thread burning a core if it is slow), see whether the stopped
          // one finishes within another limit's time: if it does, the call is tried again; if
          // not, it has taken twice the limit and the pattern is slow.
          const confirm = setTimeout(() => {
            w.off('exit', finished);
            finish({ killed: job, strike: 1, elapsed: performance.timeOrigin + performance.now() - start });
          }, Math.max(0, start + 2 * limit - performance.timeOrigin - performance.now()));
          const finished = () => {
            clearTimeout(confirm);
            finish({ killed: job, strike: 0, elapsed });
          };
          w.once('exit', finished);
        },
        Math.max(1, Math.min(10, limit / 4)),
      );
      w.postMessage(
        {
          id,
          shared,
          resultsAt: layout.resultsAt,
          msAt: layout.msAt,
          jobs: b.pairs,
          patterns: b.patterns,
          texts: all.buffer,
          offsets: b.offsets,
          from: b.from,
          strike: b.strike,
          slowPatterns: b.slowPatterns,
          limitMs: limit,
        },
        [all.buffer],
      );
    });
  }
}
