import { ConfigError } from '../config';
import { loadModelConfig } from './config';

describe('model configuration', () => {
  it('with nothing set, no LLM: the fast classifier answers', () => {
    const c = loadModelConfig({});
    expect(c.decision).toBeUndefined();
    expect(c.local).toBeUndefined();
    expect(c.backend).toBe('auto');
  });

  it('reads NEATROOTS_MODEL_REPLY_MAX_BYTES (1 MiB by default), and refuses a value that is not a size it takes, naming it', () => {
    expect(loadModelConfig({}).replyMaxBytes).toBe(1024 * 1024);
    expect(loadModelConfig({ NEATROOTS_MODEL_REPLY_MAX_BYTES: '4194304' }).replyMaxBytes).toBe(4 * 1024 * 1024);
    for (const bad of ['lots', '1000', '1.5', '2147483648']) {
      expect(() => loadModelConfig({ NEATROOTS_MODEL_REPLY_MAX_BYTES: bad })).toThrow(ConfigError);
      expect(() => loadModelConfig({ NEATROOTS_MODEL_REPLY_MAX_BYTES: bad })).toThrow(/NEATROOTS_MODEL_REPLY_MAX_BYTES: /);
    }
  });

  it('reads the decision model and the local LLM', () => {
    const c = loadModelConfig({
      NEATROOTS_DECISION_MODEL_URL: 'https://api.example.com/v1',
      NEATROOTS_DECISION_MODEL_NAME: 'judge-1',
      NEATROOTS_DECISION_MODEL_KEY: 'k',
      NEATROOTS_LLM_URL: 'http://127.0.0.1:11434/v1',
      NEATROOTS_LLM_MODEL: 'llama3.1:8b',
      NEATROOTS_LLM_TIMEOUT_MS: '5000',
    });
    expect(c.decision).toMatchObject({ url: 'https://api.example.com/v1', model: 'judge-1', key: 'k' });
    expect(c.local).toMatchObject({ url: 'http://127.0.0.1:11434/v1', model: 'llama3.1:8b', timeoutMs: 5000, jsonMode: true });
  });

  it('takes TYPESAFE_API_KEY (the seed\'s name) as the decision model\'s key, NEATROOTS_DECISION_MODEL_KEY first', () => {
    const on = { NEATROOTS_DECISION_MODEL_URL: 'https://api.example.com/v1', NEATROOTS_DECISION_MODEL_NAME: 'judge-1', TYPESAFE_API_KEY: 'ts-key' };
    expect(loadModelConfig(on).decision).toMatchObject({ key: 'ts-key' });
    expect(loadModelConfig({ ...on, NEATROOTS_DECISION_MODEL_KEY: 'own' }).decision).toMatchObject({ key: 'own' });
    // Turned off, the key alone asks for nothing.
    expect(loadModelConfig({ TYPESAFE_API_KEY: 'ts-key', NEATROOTS_DECISION_MODEL: 'off' }).decision).toBeUndefined();
  });

  it('keeps a decision model that is turned off out of the way', () => {
    const c = loadModelConfig({ NEATROOTS_DECISION_MODEL_URL: 'https://x.test/v1', NEATROOTS_DECISION_MODEL_NAME: 'm', NEATROOTS_DECISION_MODEL: 'off' });
    expect(c.decision).toBeUndefined();
  });

  it('reads the reasoning model (sopops reviews); without it the local LLM reviews', () => {
    expect(loadModelConfig({}).reasoning).toBeUndefined();
    const c = loadModelConfig({ NEATROOTS_REASONING_MODEL_URL: 'http://127.0.0.1:8001/v1', NEATROOTS_REASONING_MODEL_NAME: 'reasoner', NEATROOTS_REASONING_MODEL_TIMEOUT_MS: '9000' });
    expect(c.reasoning).toMatchObject({ url: 'http://127.0.0.1:8001/v1', model: 'reasoner', timeoutMs: 9000, concurrency: 2 });
  });

  it.each([
    [{ NEATROOTS_REASONING_MODEL_URL: 'http://127.0.0.1:8001/v1' }, 'NEATROOTS_REASONING_MODEL_NAME'],
    [{ NEATROOTS_REASONING_MODEL_URL: 'nope', NEATROOTS_REASONING_MODEL_NAME: 'r' }, 'NEATROOTS_REASONING_MODEL_URL'],
    [{ NEATROOTS_LLM_URL: 'http://127.0.0.1:8000/v1' }, 'NEATROOTS_LLM_MODEL'],
    [{ NEATROOTS_DECISION_MODEL_URL: 'https://x.test/v1' }, 'NEATROOTS_DECISION_MODEL_NAME'],
    [{ NEATROOTS_LLM_URL: 'not a url', NEATROOTS_LLM_MODEL: 'm' }, 'NEATROOTS_LLM_URL'],
    [{ NEATROOTS_LLM_TIMEOUT_MS: 'soon' }, 'NEATROOTS_LLM_TIMEOUT_MS'],
    [{ NEATROOTS_CLASSIFIER_BACKEND: 'local' }, 'NEATROOTS_CLASSIFIER_BACKEND'],
    [{ NEATROOTS_DECISION_MODEL: 'maybe' }, 'NEATROOTS_DECISION_MODEL'],
    [{ TYPESAFE_API_KEY: 'ts-key' }, 'TYPESAFE_API_KEY: is the decision model\'s key, but NEATROOTS_DECISION_MODEL_URL'],
  ])('fails at start-up naming the variable: %j', (env, name) => {
    expect(() => loadModelConfig(env)).toThrow(ConfigError);
    expect(() => loadModelConfig(env)).toThrow(name);
  });
});
