import { ConfigError, loadConfig } from './config';
import { loadModelConfig } from './models/config';

/**
 * A numeric setting set but blank (`VAR=` in a .env file, `value: ""` in a Kubernetes env, a
 * compose pass-through of a blank shell variable) is unset: its default. Read as a number it
 * was 0, which for the span retention meant every span kept for good, silently.
 */
describe('a blank numeric setting', () => {
  it('keeps the span retention at its default, 30 days, not 0 (spans kept for good)', () => {
    for (const blank of ['', ' ', '\t']) expect(loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: blank }).NEATROOTS_SPAN_RETENTION_DAYS).toBe(30);
    expect(loadConfig({ NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '' }).NEATROOTS_TRANSCRIPT_RETENTION_DAYS).toBe(0);
    // 0 set on purpose still keeps every span; a number is read as before.
    expect(loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: '0' }).NEATROOTS_SPAN_RETENTION_DAYS).toBe(0);
    expect(loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: ' 7 ' }).NEATROOTS_SPAN_RETENTION_DAYS).toBe(7);
  });

  it('is its default for every numeric setting, as if unset', () => {
    const defaults = loadConfig({}) as unknown as Record<string, unknown>;
    const numeric = Object.keys(defaults).filter((k) => typeof defaults[k] === 'number');
    expect(numeric).toEqual(expect.arrayContaining(['NEATROOTS_PRECHECK_TIMEOUT_MS', 'NEATROOTS_SHUTDOWN_DELAY_MS', 'NEATROOTS_MAX_FUTURE_MS', 'NEATROOTS_HTTP_PORT']));
    for (const k of numeric) expect({ [k]: (loadConfig({ [k]: '' }) as unknown as Record<string, unknown>)[k] }).toEqual({ [k]: defaults[k] });
    // Those with no default stay unset (NEATROOTS_MEMORY_CEILING_MB: 0 would mean no ceiling).
    expect(loadConfig({ NEATROOTS_MEMORY_CEILING_MB: '', NEATROOTS_QUESTION_CONSUMERS: ' ' })).toMatchObject({
      NEATROOTS_MEMORY_CEILING_MB: undefined,
      NEATROOTS_QUESTION_CONSUMERS: undefined,
    });
  });

  it('is its default in the model settings too (0 retries, a 0 ms cache otherwise)', () => {
    const blank = loadModelConfig({ NEATROOTS_QUESTION_RETRIES: '', NEATROOTS_QUESTION_CACHE_TTL_MS: '', NEATROOTS_QUESTION_BATCH_WAIT_MS: ' ', NEATROOTS_LLM_TIMEOUT_MS: '' });
    const unset = loadModelConfig({});
    expect(blank.batch).toEqual(unset.batch);
    expect(blank.cacheTtlMs).toBe(unset.cacheTtlMs);
    expect(unset.batch.retries).toBe(2);
  });
});

/**
 * A numeric setting given a value it does not take is said with the variable, what it takes and
 * the value given: zod's own words ('Expected number, received nan') said neither.
 */
describe('a numeric setting given a value it does not take', () => {
  const said = (env: Record<string, string>, load: (e: Record<string, string>) => unknown = loadConfig): string => {
    try {
      load(env);
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as ConfigError).issues.join('\n');
    }
    throw new Error(`${JSON.stringify(env)} was taken`);
  };

  it('names the variable, what it expects and the value given', () => {
    expect(said({ NEATROOTS_HTTP_PORT: 'abc' })).toBe('NEATROOTS_HTTP_PORT: expected a whole number from 0 to 65535, got "abc"');
    expect(said({ NEATROOTS_HTTP_PORT: '70000' })).toBe('NEATROOTS_HTTP_PORT: expected a whole number from 0 to 65535, got "70000"');
    expect(said({ NEATROOTS_MAX_ATTRIBUTES: 'abc' })).toBe('NEATROOTS_MAX_ATTRIBUTES: expected a whole number of at least 1, got "abc"');
    expect(said({ NEATROOTS_PARTITIONS: '1.5' })).toBe('NEATROOTS_PARTITIONS: expected a whole number from 1 to 1000, got "1.5"');
    expect(said({ NEATROOTS_SPAN_RETENTION_DAYS: 'forever' })).toBe('NEATROOTS_SPAN_RETENTION_DAYS: expected a number from 0 to 36500, got "forever"');
    expect(said({ NEATROOTS_QUESTION_RETRIES: 'lots' }, loadModelConfig)).toBe('NEATROOTS_QUESTION_RETRIES: expected a whole number from 0 to 10, got "lots"');
  });

  it('does so for every numeric setting', () => {
    const defaults = loadConfig({}) as unknown as Record<string, unknown>;
    const numeric = [...Object.keys(defaults).filter((k) => typeof defaults[k] === 'number'), 'NEATROOTS_MEMORY_CEILING_MB', 'NEATROOTS_QUESTION_CONSUMERS'];
    expect(numeric.length).toBeGreaterThan(40);
    for (const k of numeric) expect(said({ [k]: 'abc' })).toMatch(new RegExp(`^${k}: expected a (whole )?number( from -?\\d+ to \\d+| of at least -?\\d+| of at most \\d+)?, got "abc"$`));
  });
});
