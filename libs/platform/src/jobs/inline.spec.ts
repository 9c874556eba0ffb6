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
