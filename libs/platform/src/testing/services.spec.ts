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

  it('says that testcontainers would be used where Docker is reachable', () => {
    const r = findService('kafka', { DOCKER_HOST: 'unix:///var/run/docker.sock' });
    expect(r).toEqual({ missing: expect.stringContaining('testcontainers is not installed') });
  });

  it('fails instead of skipping when services are required (CI)', () => {
    expect(() => serviceOrSkip('kafka', 'Bus contract', { NEATROOTS_REQUIRE_SERVICES: '1' })).toThrow(MissingServiceError);
    expect(() => serviceOrSkip('kafka', 'Bus contract', { NEATROOTS_REQUIRE_SERVICES: '1' })).toThrow(/Bus contract needs kafka/);
  });
});
