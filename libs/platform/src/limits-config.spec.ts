import { ConfigError, loadConfig, spanLimitsOf } from './config';

describe('NEATROOTS_MAX_* and NEATROOTS_BUS_ATTEMPTS', () => {
  it('default to the documented limits', () => {
    const c = loadConfig({});
    expect(spanLimitsOf(c)).toEqual({
      maxJsonDepth: 64,
      maxAttributes: 1_000,
      maxAttributeChars: 1024 * 1024,
      maxItemChars: 4 * 1024 * 1024,
      maxTokens: 1_000_000_000,
      maxFutureMs: 86_400_000,
    });
    expect(c.NEATROOTS_BUS_ATTEMPTS).toBe(3);
  });

  it('are read from the environment', () => {
    const c = loadConfig({ NEATROOTS_MAX_JSON_DEPTH: '16', NEATROOTS_MAX_TOKENS: '5000', NEATROOTS_MAX_FUTURE_MS: '0', NEATROOTS_BUS_ATTEMPTS: '5' });
    expect(spanLimitsOf(c)).toMatchObject({ maxJsonDepth: 16, maxTokens: 5000, maxFutureMs: 0 });
    expect(c.NEATROOTS_BUS_ATTEMPTS).toBe(5);
  });

  it('refuse a value that would not protect anything, naming the variable', () => {
    for (const [name, value] of [
      ['NEATROOTS_MAX_JSON_DEPTH', 'deep'],
      ['NEATROOTS_MAX_JSON_DEPTH', '5000'],
      ['NEATROOTS_MAX_TOKENS', String(2 ** 60)],
      ['NEATROOTS_MAX_ITEM_CHARS', '-1'],
      ['NEATROOTS_BUS_ATTEMPTS', '0'],
    ]) {
      let err: unknown;
      try {
        loadConfig({ [name]: value });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain(name);
    }
  });
});

describe('NEATROOTS_LIVE_TRACE_GAP_MS', () => {
  it('defaults to a second, takes 0 (every batch) up to ten minutes, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).NEATROOTS_LIVE_TRACE_GAP_MS).toBe(1_000);
    expect(loadConfig({ NEATROOTS_LIVE_TRACE_GAP_MS: '0' }).NEATROOTS_LIVE_TRACE_GAP_MS).toBe(0);
    expect(loadConfig({ NEATROOTS_LIVE_TRACE_GAP_MS: '250' }).NEATROOTS_LIVE_TRACE_GAP_MS).toBe(250);
    for (const value of ['-1', 'soon', '1.5', String(3_600_000)]) {
      expect(() => loadConfig({ NEATROOTS_LIVE_TRACE_GAP_MS: value })).toThrow(/NEATROOTS_LIVE_TRACE_GAP_MS/);
    }
  });
});

describe('NEATROOTS_KAFKA_CONCURRENT_PARTITIONS', () => {
  it('defaults to 8 (a fetch of the default six partitions is one step), takes 1 to 64, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).NEATROOTS_KAFKA_CONCURRENT_PARTITIONS).toBe(8);
    expect(loadConfig({ NEATROOTS_KAFKA_CONCURRENT_PARTITIONS: '2' }).NEATROOTS_KAFKA_CONCURRENT_PARTITIONS).toBe(2);
    for (const value of ['0', 'all', '65']) {
      expect(() => loadConfig({ NEATROOTS_KAFKA_CONCURRENT_PARTITIONS: value })).toThrow(/NEATROOTS_KAFKA_CONCURRENT_PARTITIONS/);
    }
  });
});

describe('NEATROOTS_QUESTION_CONSUMERS', () => {
  it('is unset by default (the deployment chooses), takes 1 to 64, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).NEATROOTS_QUESTION_CONSUMERS).toBeUndefined();
    expect(loadConfig({ NEATROOTS_QUESTION_CONSUMERS: '3' }).NEATROOTS_QUESTION_CONSUMERS).toBe(3);
    for (const value of ['0', 'many', '1.5', '65']) {
      expect(() => loadConfig({ NEATROOTS_QUESTION_CONSUMERS: value })).toThrow(/NEATROOTS_QUESTION_CONSUMERS/);
    }
  });
});

describe('NEATROOTS_WINDOW_CHECKPOINT_MS', () => {
  it('defaults to 200 ms, takes 0 (every save journaled on its own) up to ten seconds, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).NEATROOTS_WINDOW_CHECKPOINT_MS).toBe(200);
    expect(loadConfig({ NEATROOTS_WINDOW_CHECKPOINT_MS: '0' }).NEATROOTS_WINDOW_CHECKPOINT_MS).toBe(0);
    expect(loadConfig({ NEATROOTS_WINDOW_CHECKPOINT_MS: '1000' }).NEATROOTS_WINDOW_CHECKPOINT_MS).toBe(1_000);
    for (const value of ['-1', 'often', '2.5', '10001']) {
      expect(() => loadConfig({ NEATROOTS_WINDOW_CHECKPOINT_MS: value })).toThrow(/NEATROOTS_WINDOW_CHECKPOINT_MS/);
    }
  });
});

describe('NEATROOTS_KAFKA_COMMIT_INTERVAL_MS', () => {
  it('defaults to half a second, takes 0 (every batch) up to a minute, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).NEATROOTS_KAFKA_COMMIT_INTERVAL_MS).toBe(500);
    expect(loadConfig({ NEATROOTS_KAFKA_COMMIT_INTERVAL_MS: '0' }).NEATROOTS_KAFKA_COMMIT_INTERVAL_MS).toBe(0);
    expect(loadConfig({ NEATROOTS_KAFKA_COMMIT_INTERVAL_MS: '2000' }).NEATROOTS_KAFKA_COMMIT_INTERVAL_MS).toBe(2_000);
    for (const value of ['-1', 'often', '0.5', '60001']) {
      expect(() => loadConfig({ NEATROOTS_KAFKA_COMMIT_INTERVAL_MS: value })).toThrow(/NEATROOTS_KAFKA_COMMIT_INTERVAL_MS/);
    }
  });
});
