import { ConfigError, loadConfig } from '../config';
import { createLogger, warnWhileSlow } from './log';

describe('the logger', () => {
  it('writes JSON lines with level, service, project and run id, and the error with its stack', () => {
    const lines: string[] = [];
    const log = createLogger({ format: 'json', write: (l) => lines.push(l) }).child({ service: 'rule-engine' });
    log.child({ project: 'shop', run_id: 'r1' }).error('tick failed', new Error('redis down'));
    log.debug('not written at info');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({
      level: 'error',
      service: 'rule-engine',
      project: 'shop',
      run_id: 'r1',
      msg: 'tick failed',
      err: { message: 'redis down', stack: expect.stringContaining('Error: redis down') },
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
  });

  it('writes one readable line a message on a terminal', () => {
    const lines: string[] = [];
    createLogger({ format: 'pretty', level: 'debug', write: (l) => lines.push(l) }).child({ service: 'review' }).debug('stored 3 runs', { project: 'shop' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] DEBUG: review: stored 3 runs .*"project":"shop"/);
  });

  it('takes its level and format from the validated configuration', () => {
    expect(loadConfig({ NEATROOTS_LOG_LEVEL: 'warn', NEATROOTS_LOG_FORMAT: 'json' })).toMatchObject({ NEATROOTS_LOG_LEVEL: 'warn', NEATROOTS_LOG_FORMAT: 'json' });
    expect(() => loadConfig({ NEATROOTS_LOG_LEVEL: 'loud' })).toThrow(ConfigError);
    expect(() => loadConfig({ NEATROOTS_LOG_LEVEL: 'loud' })).toThrow(/NEATROOTS_LOG_LEVEL/);
  });
});

describe('warnWhileSlow', () => {
  it('says what a step of a stop is still waiting on, while it waits, and nothing once it is done', async () => {
    const said: string[] = [];
    const log = { warn: (m: string) => void said.push(m) };
    let done!: () => void;
    const step = warnWhileSlow(log, 'shutdown: review', () => new Promise<void>((r) => (done = r)), 40);
    await new Promise((r) => setTimeout(r, 100));
    expect(said.length).toBeGreaterThanOrEqual(2);
    expect(said[0]).toMatch(/^shutdown: review: not done after \d+ s$/);
    done();
    await step;
    const n = said.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(said.length).toBe(n);
    await expect(warnWhileSlow(log, 'x', () => Promise.reject(new Error('boom')), 40)).rejects.toThrow('boom');
  });
});
