// Integration tests run the real adapters; outside its tests the service may not import them.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { Redis } from 'ioredis';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { BullJobs } from '@neatroots/platform';

/**
 * Replicas of the review service on BullMQ with the real Redis (the distributed deployment),
 * each its own BullJobs under one key prefix (replicas: those opened, in order); close() closes them all and deletes the prefix's
 * keys, so runs do not see each other's jobs. Named *.test.ts: a helper, not run by jest.
 */
export function bullReplicas(url: string, prefix: string, closeGraceMs = 5_000): { replica(): BullJobs; replicas: BullJobs[]; close(): Promise<void> } {
  const opened: BullJobs[] = [];
  return {
    replicas: opened,
    replica: () => {
      const jobs = new BullJobs({ url, prefix, closeGraceMs });
      opened.push(jobs);
      return jobs;
    },
    close: async () => {
      await Promise.allSettled(opened.map((j) => j.close()));
      const r = new Redis(url);
      try {
        const keys = await r.keys(`${prefix}:*`);
        if (keys.length) await r.del(...keys);
      } finally {
        r.disconnect();
      }
    },
  };
}
