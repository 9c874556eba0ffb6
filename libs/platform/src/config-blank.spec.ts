import { loadConfig } from './config';
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
