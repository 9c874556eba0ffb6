import { dockerReachable, startContainers } from './containers';
import { findService, MissingServiceError, serviceOrSkip } from './services';

describe('service selection for integration tests', () => {
  it('takes the address from the environment', () => {
    expect(findService('kafka', { NEATROOTS_KAFKA_BROKERS: ' a:9092, b:9092 ' })).toEqual({ found: { brokers: ['a:9092', 'b:9092'] } });
    expect(serviceOrSkip('redis', 's', { NEATROOTS_REDIS_URL: 'redis://x:6379' })).toEqual({ url: 'redis://x:6379' });
    expect(serviceOrSkip('postgres', 's', { NEATROOTS_PG_URL: 'postgres://u@h/db', NEATROOTS_REQUIRE_SERVICES: '1' })).toEqual({ url: 'postgres://u@h/db' });
  });

  it('skips with one line saying why when the service is missing', () => {
    const write = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(serviceOrSkip('redis', 'My suite', {})).toBeUndefined();
      expect(write).toHaveBeenCalledTimes(1);
      expect(String(write.mock.calls[0][0])).toMatch(/^skipping My suite: no redis \(set NEATROOTS_REDIS_URL or run deploy\/local\/services up.*\)\n$/);
    } finally {
      write.mockRestore();
    }
  });

  it('says in the skip line what testcontainers did', () => {
    expect(findService('kafka', { NEATROOTS_TESTCONTAINERS_KAFKA: 'a Docker engine is reachable, but testcontainers could not start apache/kafka:3.8.1: pull denied' })).toEqual({
      missing: 'set NEATROOTS_KAFKA_BROKERS or run deploy/local/services up; a Docker engine is reachable, but testcontainers could not start apache/kafka:3.8.1: pull denied',
    });
  });

  it('starts nothing without Docker, and notes why for the skip line', async () => {
    const env: NodeJS.ProcessEnv = { NEATROOTS_REDIS_URL: 'redis://given:6379' };
    const r = await startContainers(env);
    expect(r.started).toEqual({});
    expect(env.NEATROOTS_REDIS_URL).toBe('redis://given:6379'); // a given address is used as it is
    expect(env.NEATROOTS_TESTCONTAINERS_REDIS).toBeUndefined();
    if (!dockerReachable(env)) expect(findService('kafka', env)).toEqual({ missing: expect.stringContaining('no Docker engine reachable (DOCKER_HOST unset') });
    await r.stop();
  });

  it('with a Docker engine named, loads testcontainers on this Node.js and tries it (a broken install or release would say it did not load)', async () => {
    // Nothing listens on port 1: testcontainers loads, then finds no container runtime.
    const env: NodeJS.ProcessEnv = { DOCKER_HOST: 'tcp://127.0.0.1:1', NEATROOTS_KAFKA_BROKERS: 'k:9092', NEATROOTS_PG_URL: 'postgres://u@h/db' };
    const r = await startContainers(env);
    expect(r.started).toEqual({});
    expect(env.NEATROOTS_TESTCONTAINERS_REDIS).toMatch(/^a Docker engine is reachable, but testcontainers could not start redis:7-alpine: /);
    expect(env.NEATROOTS_TESTCONTAINERS_REDIS).not.toContain('did not load');
    await r.stop();
  }, 60_000);

  it('starts nothing when switched off', async () => {
    const env: NodeJS.ProcessEnv = { NEATROOTS_TESTCONTAINERS: '0', DOCKER_HOST: 'tcp://127.0.0.1:1' };
    expect((await startContainers(env)).started).toEqual({});
    expect(findService('postgres', env)).toEqual({ missing: expect.stringContaining('testcontainers switched off (NEATROOTS_TESTCONTAINERS=0)') });
  });

  it('fails instead of skipping when services are required (CI)', () => {
    expect(() => serviceOrSkip('kafka', 'Bus contract', { NEATROOTS_REQUIRE_SERVICES: '1' })).toThrow(MissingServiceError);
    expect(() => serviceOrSkip('kafka', 'Bus contract', { NEATROOTS_REQUIRE_SERVICES: '1' })).toThrow(/Bus contract needs kafka/);
  });
});
