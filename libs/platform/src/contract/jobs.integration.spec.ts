import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { BullJobs } from '../jobs/bullmq';
import { InlineJobs } from '../jobs/inline';
import { serviceOrSkip } from '../testing/services';
import { jobsContract } from './jobs.contract.test';

// Inline: one process, so "two replicas" of a namespace are one instance.
const inline = new Map<string, InlineJobs>();
jobsContract('InlineJobs', {
  replicas: false,
  open: async (ns, listeners) => {
    let jobs = inline.get(ns);
    if (!jobs) inline.set(ns, (jobs = new InlineJobs(listeners)));
    return jobs;
  },
  schedules: async (_ns, queue, client) => (client as InlineJobs).schedulesOf(queue),
});

const redis = serviceOrSkip('redis', 'Jobs contract on BullMQ');
if (redis) {
  const prefixes: string[] = [];
  jobsContract('BullJobs (BullMQ on Redis)', {
    replicas: true,
    open: async (ns, listeners) => {
      prefixes.push(ns);
      return new BullJobs({ url: redis.url, prefix: ns, ...listeners, closeGraceMs: 5_000 });
    },
    schedules: async (ns, queue) => {
      const q = new Queue(queue, { connection: { url: redis.url }, prefix: ns });
      try {
        return (await q.getJobSchedulers()).map((s) => s.key);
      } finally {
        await q.close();
      }
    },
  });
  afterAll(async () => {
    const r = new Redis(redis.url);
    try {
      for (const p of prefixes) {
        const keys = await r.keys(`${p}:*`);
        if (keys.length) await r.del(...keys);
      }
    } finally {
      r.disconnect();
    }
  });
} else {
  describe.skip('Jobs contract: BullJobs (no Redis)', () => it('needs Redis', () => undefined));
}
