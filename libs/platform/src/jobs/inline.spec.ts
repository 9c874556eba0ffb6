import { InlineJobs } from './inline';

describe('InlineJobs schedules', () => {
  it('waits for a firing further away than a timer can hold (a monthly or yearly pattern) instead of firing at once, again and again', async () => {
    const jobs = new InlineJobs();
    const ran: unknown[] = [];
    await jobs.work('retention', async (job) => void ran.push(job));
    // The first of the month half a year from now: months away, past a timer's 24.8 days.
    const month = ((new Date().getUTCMonth() + 6) % 12) + 1;
    await jobs.schedule('retention', 'twice-a-year', `0 0 1 ${month} *`, {});
    await new Promise((r) => setTimeout(r, 300));
    expect(ran).toEqual([]);
    expect(jobs.schedulesOf('retention')).toEqual(['twice-a-year']);
    await jobs.close();
  });
});

describe('InlineJobs stopping', () => {
  it('reports a job the stop cut short with tries left as stopped, not failed, and does not run its failure hook', async () => {
    const failed: unknown[] = [];
    const stopped: unknown[] = [];
    const hook: unknown[] = [];
    const jobs = new InlineJobs({ onFailed: (f) => failed.push(f), onStopped: (s) => stopped.push(s) });
    let release!: () => void;
    const started = new Promise<void>((ready) => {
      void jobs.work(
        'check',
        async () => {
          ready();
          await new Promise<void>((r) => (release = r));
          // What review's handlers do: queue the next step, after the stop closed the queue.
          await jobs.add('check', { next: true });
        },
        { onFailed: async (_d, f) => void hook.push(f) },
      );
    });
    await jobs.add('check', { first: true }, { jobId: 'c1', attempts: 6 });
    await started;
    const closing = jobs.close();
    release();
    await closing;
    expect(stopped).toEqual([{ queue: 'check', id: 'c1', attempt: 1, attempts: 6, reason: 'jobs: closed' }]);
    expect(failed).toEqual([]);
    expect(hook).toEqual([]);
  });

  it('still reports a job whose last try failed while stopping as failed', async () => {
    const failed: unknown[] = [];
    const stopped: unknown[] = [];
    const jobs = new InlineJobs({ onFailed: (f) => failed.push(f), onStopped: (s) => stopped.push(s) });
    let release!: () => void;
    const started = new Promise<void>((ready) => {
      void jobs.work('check', async () => {
        ready();
        await new Promise<void>((r) => (release = r));
        throw new Error('the model refused');
      });
    });
    await jobs.add('check', {}, { jobId: 'c2', attempts: 1 });
    await started;
    const closing = jobs.close();
    release();
    await closing;
    expect(failed).toEqual([{ queue: 'check', id: 'c2', attempts: 1, reason: 'the model refused' }]);
    expect(stopped).toEqual([]);
  });
});
