import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main, type Io } from './cli';
import { testEnv } from './test-app.test';

/**
 * A model configuration that cannot answer stops the process at start-up with a message naming
 * the variables (docs/questions.md, Configuration), not later inside the question service.
 */
describe('NEATROOTS_CLASSIFIER_BACKEND=decision with the decision model off', () => {
  let home: string;
  beforeEach(() => (home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-model-config-'))));
  afterEach(() => fs.rmSync(home, { recursive: true, force: true }));

  const env = () =>
    testEnv(home, {
      NEATROOTS_LOG_LEVEL: 'error',
      NEATROOTS_DECISION_MODEL_URL: 'http://127.0.0.1:9/v1',
      NEATROOTS_DECISION_MODEL_NAME: 'm',
      NEATROOTS_DECISION_MODEL: 'off',
      NEATROOTS_CLASSIFIER_BACKEND: 'decision',
    });

  async function run(args: string[]): Promise<{ code: number; err: string[] }> {
    const err: string[] = [];
    const io: Io = { out: () => undefined, err: (l) => err.push(l), env: env(), cwd: home };
    return { code: await main(args, io), err };
  }

  const SAID = 'NEATROOTS_CLASSIFIER_BACKEND: is decision but NEATROOTS_DECISION_MODEL is off (configured but unused); turn it on, or choose another backend (auto, local, classifier)';

  it('neatroots start exits 2 naming both variables', async () => {
    const r = await run(['start', '--no-demo']);
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toBe(`neatroots start: invalid configuration:\n  ${SAID}`);
  });

  it('neatroots serve --target question exits 2 naming both variables', async () => {
    const r = await run(['serve', '--target', 'question']);
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toBe(`neatroots serve: invalid configuration:\n  ${SAID}`);
  });

  it('on, or another backend, starts as before (the configuration loads)', async () => {
    const { loadModelConfig } = await import('@neatroots/platform');
    expect(loadModelConfig({ ...env(), NEATROOTS_DECISION_MODEL: 'on' }).decision).toMatchObject({ model: 'm' });
    expect(loadModelConfig({ ...env(), NEATROOTS_CLASSIFIER_BACKEND: 'classifier' }).decision).toBeUndefined();
  });
});
