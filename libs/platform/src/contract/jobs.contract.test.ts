/**
 * The jobs port's contract, passed by InlineJobs and BullJobs alike (run by
 * contract/jobs.integration.spec.ts). A helper (*.test.ts), not a suite, not built.
 */
import { JobFailedError, type FailedJob, type Jobs, type RetriedJob } from '@neatroots/ports';
import { uniqueName } from '../testing/services';

/** What a driver reports: a job that used up its tries, and a try that failed with tries left. */
export interface JobListeners {
  onFailed: (job: FailedJob) => void;
  onRetry: (job: RetriedJob) => void;
}

export interface JobsContractTarget {
  /**
   * A client of the job system named `namespace`: two calls with the same namespace are two
   * replicas sharing the queues (for the in-process driver, one instance may be returned
   * twice). The suite closes every client it opens.
   */
  open(namespace: string, listeners: JobListeners): Promise<Jobs>;
  /** The schedules registered under `namespace` for `queue`, by name (what a replica sees). */
  schedules(namespace: string, queue: string, client: Jobs): Promise<string[]>;
  /** Whether two open() calls with one namespace are separate replicas (each runs its own workers). */
  replicas: boolean;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `cond` holds (polling every 20 ms), at most `ms`. */
export async function until(cond: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}

export function jobsContract(name: string, target: JobsContractTarget): void {
  describe(`Jobs contract: ${name}`, () => {
    const clients: Jobs[] = [];
    const failed: FailedJob[] = [];
    const retried: RetriedJob[] = [];
    const open = async (ns = uniqueName('contract_jobs')) => {
      const c = await target.open(ns, { onFailed: (f) => failed.push(f), onRetry: (r) => retried.push(r) });
      if (!clients.includes(c)) clients.push(c);
      return { jobs: c, ns };
    };
    afterAll(async () => {
      await Promise.all(clients.map((c) => c.close()));
    });

    it('runs each job through the handler, jobs added before work() included', async () => {
      const { jobs } = await open();
      const seen: number[] = [];
      await jobs.add('q', { n: 1 });
      await jobs.work<{ n: number }>('q', async (d) => {
        seen.push(d.n);
      });
      await jobs.add('q', { n: 2 });
      await until(() => seen.length === 2);
      expect(seen.sort()).toEqual([1, 2]);
    });

    it('adds a job once per jobId: the same id again runs nothing more', async () => {
      const { jobs } = await open();
      let runs = 0;
      await jobs.work('q', async () => {
        runs++;
        await sleep(50);
      });
      const a = await jobs.add('q', { session: 's1' }, { jobId: 'check-s1-v1' });
      const b = await jobs.add('q', { session: 's1' }, { jobId: 'check-s1-v1' });
      expect(b).toBe(a);
      await until(() => runs >= 1);
      await jobs.add('q', { session: 's1' }, { jobId: 'check-s1-v1' }); // done, still remembered
      await expect(jobs.add('q', {}, { jobId: 'a:b' })).rejects.toThrow('may not contain ":"');
      await sleep(300);
      expect(runs).toBe(1);
    });

    it('shares a job not yet begun among the adds with its coalesce key; an add once its handler began queues another', async () => {
      const { jobs, ns } = await open();
      // two replicas where the driver has them: the waiting job may be put aside by the other, its key busy
      const second = target.replicas ? (await open(ns)).jobs : undefined;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const ran: number[] = [];
      const handler = async (d: { n: number }) => {
        ran.push(d.n);
        await gate;
      };
      const opts = { serializeBy: () => 'ws' };
      await jobs.work('coalesced', handler, opts);
      if (second) await second.work('coalesced', handler, opts);
      const first = await jobs.add('coalesced', { n: 1 }, { coalesce: 'ws' });
      await until(() => ran.length === 1); // begun, held on the gate
      const waiting: string[] = [];
      for (let n = 2; n <= 6; n++) waiting.push(await (n % 2 && second ? second : jobs).add('coalesced', { n }, { coalesce: 'ws' }));
      expect(new Set(waiting).size).toBe(1);
      expect(waiting[0]).not.toBe(first);
      release();
      await until(() => ran.length === 2);
      // the second job begun: the next add is a job of its own
      const after = await jobs.add('coalesced', { n: 7 }, { coalesce: 'ws' });
      expect([first, waiting[0]]).not.toContain(after);
      await until(() => ran.length === 3);
      expect(ran).toEqual([1, 2, 7]);
      await expect(jobs.add('coalesced', {}, { coalesce: 'ws', jobId: 'one' })).rejects.toThrow('may not be given together');
    });

    it('retries a failing job with backoff, the attempt number rising, and returns its result to run()', async () => {
      const { jobs } = await open();
      const attempts: number[] = [];
      await jobs.work<{ x: number }, number>('q', async (d, job) => {
        attempts.push(job.attempt);
        if (job.attempt < 3) throw new Error(`flaky ${job.attempt}`);
        return d.x * 2;
      });
      const id = uniqueName('flaky');
      await expect(jobs.run<{ x: number }, number>('q', { x: 21 }, { attempts: 3, backoffMs: 20, jobId: id })).resolves.toBe(42);
      expect(attempts).toEqual([1, 2, 3]);
      // each failed try is reported as it happens, with the delay before the next (doubling)
      expect(retried.filter((r) => r.id === id)).toEqual([
        { queue: 'q', id, attempt: 1, attempts: 3, reason: 'flaky 1', retry_in_ms: 20 },
        { queue: 'q', id, attempt: 2, attempts: 3, reason: 'flaky 2', retry_in_ms: 40 },
      ]);
    });

    it('sets a job aside after its attempts, with the reason, and never runs it again', async () => {
      const { jobs } = await open();
      let runs = 0;
      await jobs.work('poison', async () => {
        runs++;
        throw new Error('session body is not valid');
      });
      const ran = jobs.run('poison', { bad: true }, { attempts: 2, backoffMs: 20, jobId: uniqueName('p') });
      await expect(ran).rejects.toBeInstanceOf(JobFailedError);
      await expect(ran).rejects.toThrow('session body is not valid');
      await until(() => failed.some((f) => f.queue === 'poison'));
      expect(failed.find((f) => f.queue === 'poison')).toMatchObject({ attempts: 2, reason: 'session body is not valid' });
      // the first try was a retry; the last is reported as failed, not as a retry
      expect(retried.filter((r) => r.queue === 'poison').map((r) => r.attempt)).toEqual([1]);
      await sleep(200);
      expect(runs).toBe(2);
    });

    it("tells the work's onFailed, once, of a job that failed for good, with its data, before the driver's onFailed, and a hook's error in the reason", async () => {
      const { jobs } = await open();
      const told: { data: unknown; job: FailedJob; driverToldYet: boolean }[] = [];
      await jobs.work<{ n: number }>(
        'given-up',
        async (d) => {
          throw new Error(`model away (${d.n})`);
        },
        {
          onFailed: async (data, job) => {
            told.push({ data, job, driverToldYet: failed.some((f) => f.queue === 'given-up' && f.id === job.id) });
            if (data.n === 2) throw new Error('database away');
          },
        },
      );
      const [one, two] = [uniqueName('g'), uniqueName('g')];
      await jobs.add('given-up', { n: 1 }, { attempts: 2, backoffMs: 20, jobId: one });
      await jobs.add('given-up', { n: 2 }, { attempts: 1, jobId: two });
      await until(() => failed.filter((f) => f.queue === 'given-up').length === 2);
      await sleep(200);
      told.sort((a, b) => (a.data as { n: number }).n - (b.data as { n: number }).n);
      expect(told.map((t) => [t.data, t.job.id, t.job.attempts, t.job.reason, t.driverToldYet])).toEqual([
        [{ n: 1 }, one, 2, 'model away (1)', false],
        [{ n: 2 }, two, 1, 'model away (2)', false],
      ]);
      expect(failed.find((f) => f.id === two)?.reason).toBe('model away (2) (and marking it failed failed: database away)');
    });

    it('never runs two jobs with one serialize key at once, while other keys run side by side', async () => {
      const { jobs, ns } = await open();
      // two replicas where the driver has them, each allowed two jobs at a time
      const second = target.replicas ? (await open(ns)).jobs : undefined;
      const active = new Map<string, number>();
      let overlapSameKey = false;
      let overlapOtherKeys = false;
      let done = 0;
      const handler = async (d: { ws: string }) => {
        active.set(d.ws, (active.get(d.ws) ?? 0) + 1);
        if ((active.get(d.ws) ?? 0) > 1) overlapSameKey = true;
        if ([...active.values()].filter((n) => n > 0).length > 1) overlapOtherKeys = true;
        await sleep(60);
        active.set(d.ws, active.get(d.ws)! - 1);
        done++;
      };
      const opts = { concurrency: 2, serializeBy: (d: { ws: string }) => d.ws };
      await jobs.work('patterns', handler, opts);
      if (second) await second.work('patterns', handler, opts);
      for (let i = 0; i < 4; i++) {
        await jobs.add('patterns', { ws: 'a' });
        await jobs.add('patterns', { ws: 'b' });
      }
      await until(() => done === 8, 30_000);
      expect(overlapSameKey).toBe(false);
      expect(overlapOtherKeys).toBe(true);
    });

    it('registers a schedule once however many replicas register it, and rejects a bad pattern', async () => {
      const { jobs, ns } = await open();
      const second = target.replicas ? (await open(ns)).jobs : jobs;
      await jobs.schedule('recluster', 'sopops_recluster_daily', '0 6 * * *', {});
      await second.schedule('recluster', 'sopops_recluster_daily', '0 6 * * *', {});
      expect(await target.schedules(ns, 'recluster', jobs)).toEqual(['sopops_recluster_daily']);
      await expect(jobs.schedule('recluster', 'bad', '61 6 * * *', {})).rejects.toThrow(/cron pattern "61 6 \* \* \*"/);
      await expect(jobs.schedule('recluster', 'short', '0 6 * *', {})).rejects.toThrow(/five fields/);
    });

    it('close() waits for the job in hand', async () => {
      const { jobs } = await open();
      let finished = false;
      let started = false;
      await jobs.work('slow', async () => {
        started = true;
        await sleep(300);
        finished = true;
      });
      await jobs.add('slow', {});
      await until(() => started);
      await jobs.close();
      expect(finished).toBe(true);
    });
  });
}
