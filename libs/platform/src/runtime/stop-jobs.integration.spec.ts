import type { Jobs, Logger, ServiceModule } from '@neatroots/ports';
import { loadConfig, type Config } from '../config';
import { createMetrics } from '../ops';
import { requireService, uniqueName } from '../testing/services';
import { distributedPlatform } from './platforms';
import { startServices } from './start';

/**
 * A distributed process that stops with a job running: its workers stop while the links to
 * other services are still open (review's session check asks the question service over gRPC
 * until its last question). Closing the links first failed the job's try on a closed channel
 * ("Channel has been shut down") where it would have ended or been handed back.
 */
const SUITE = 'a distributed stop with a job running';
const redis = requireService('redis', SUITE);
const maybe = redis ? describe : describe.skip;

const quiet: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => quiet };

maybe(SUITE, () => {
  it('lets the job end within its grace time while the links it uses are still open, and closes them after', async () => {
    const events: string[] = [];
    const failed: string[] = [];
    let began!: () => void;
    const running = new Promise<void>((r) => (began = r));
    let linkClosed!: () => void;
    const closedLink = new Promise<void>((r) => (linkClosed = r));

    // Failed and retried tries are logged by the platform (error, warn).
    const log: Logger = { ...quiet, warn: (msg: string) => void failed.push(msg), error: (msg: string) => void failed.push(msg), child: () => log };
    const config = loadConfig({ NEATROOTS_REDIS_URL: redis!, NEATROOTS_TOPIC_PREFIX: uniqueName('stopjobs'), NEATROOTS_HOME: '/nonexistent' });
    const platform = distributedPlatform({ config, log, metrics: createMetrics('t'), name: 'stop-jobs' });
    let jobs!: Jobs;
    const reviewer: ServiceModule<Config> = {
      name: 'reviewer',
      needs: [],
      async start(ctx) {
        const question = await ctx.link<{ ask(): Promise<string> }>('question');
        jobs = await ctx.platform.jobs();
        await jobs.work('checks', async () => {
          events.push('job began');
          began();
          // The job's next question comes once the stop has begun: at once if the link closed
          // (the order this fixes), else after a second (well within the 10 s grace time).
          await Promise.race([closedLink, new Promise((r) => setTimeout(r, 1_000))]);
          try {
            events.push(`asked: ${await question.ask()}`);
          } catch (e) {
            events.push(`asked: ${(e as Error).message}`);
            throw e;
          }
        });
        return { stop: async () => void events.push('reviewer stopped') };
      },
    };
    const services = await startServices({
      platform,
      modules: [reviewer],
      config,
      log,
      metrics: createMetrics('t'),
      links: {
        // A client of another service: calls fail once it is closed, as a gRPC channel's do.
        question: ({ onClose }) => {
          let closed = false;
          onClose(() => {
            closed = true;
            events.push('link closed');
            linkClosed();
          });
          return { ask: async () => (closed ? Promise.reject(new Error('Channel has been shut down')) : 'yes') };
        },
      },
    });
    await jobs.add('checks', { session: 's1' });
    await running;
    await services.close();

    expect(events).toEqual(['job began', 'asked: yes', 'reviewer stopped', 'link closed']);
    expect(failed).toEqual([]);
  }, 60_000);
});
