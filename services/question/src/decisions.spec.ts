import { loadModelConfig } from '@neatroots/platform';
import { chatDeadlineMs, decisionDeadlineMs, modelRequestMs, QuestionDecisionsClient } from './decisions';

/**
 * The deadline a caller gives the question service for a procedure decision or a check's draft
 * (the distributed deployment: review's checker, the api): long enough for what the service may
 * take with the configured model — every try timing out, the waits between tries, a request
 * ahead in the queue — so a slow but working model is not cut off and asked again by the job's
 * retry. From the same variables the question service reads.
 */
const url = 'http://127.0.0.1:9/v1';

describe('decision and draft deadlines', () => {
  it('one model request: every try timing out, and the longest wait between tries (30 s, a server\'s Retry-After)', () => {
    expect(modelRequestMs(120_000, 2)).toBe(3 * 120_000 + 2 * 30_000);
    expect(modelRequestMs(1_000, 0)).toBe(1_000);
  });

  it('a reasoning decision with the defaults (120 s, 2 retries) may take far longer than 180 s, and its deadline allows it', () => {
    const m = loadModelConfig({ NEATROOTS_REASONING_MODEL_URL: url, NEATROOTS_REASONING_MODEL_NAME: 'r' });
    // A request ahead of it, its batch, and itself again alone: 3 × (3 × 120 s + 2 × 30 s), the batch wait (10 ms), 2 s.
    expect(decisionDeadlineMs(m, 'reasoning')).toBe(3 * 420_000 + 10 + 2_000);
    // A decision whose model answers after 170 s on the second try, behind one such request: 2 × (120 s + 30 s + 170 s) = 640 s.
    expect(decisionDeadlineMs(m, 'reasoning')).toBeGreaterThan(2 * (120_000 + 30_000 + 170_000));
  });

  it('follows NEATROOTS_REASONING_MODEL_TIMEOUT_MS and NEATROOTS_QUESTION_RETRIES, up to an hour', () => {
    const at = (env: Record<string, string>) => decisionDeadlineMs(loadModelConfig({ NEATROOTS_REASONING_MODEL_URL: url, NEATROOTS_REASONING_MODEL_NAME: 'r', ...env }), 'reasoning');
    expect(at({ NEATROOTS_REASONING_MODEL_TIMEOUT_MS: '3600000' })).toBe(3 * (3 * 3_600_000 + 2 * 30_000) + 10 + 2_000);
    expect(at({ NEATROOTS_REASONING_MODEL_TIMEOUT_MS: '1000', NEATROOTS_QUESTION_RETRIES: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '0' })).toBe(3 * 1_000 + 2_000);
    expect(at({ NEATROOTS_QUESTION_RETRIES: '5' })).toBeGreaterThan(at({}));
  });

  it('each endpoint from the model that answers it: the decision model, else the local LLM; the reasoning model, else the local LLM', () => {
    const m = loadModelConfig({
      NEATROOTS_DECISION_MODEL_URL: url, NEATROOTS_DECISION_MODEL_NAME: 'd', NEATROOTS_DECISION_MODEL_TIMEOUT_MS: '10000',
      NEATROOTS_LLM_URL: url, NEATROOTS_LLM_MODEL: 'l', NEATROOTS_LLM_TIMEOUT_MS: '20000',
      NEATROOTS_QUESTION_RETRIES: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '0',
    });
    expect(decisionDeadlineMs(m, 'decision')).toBe(3 * 10_000 + 2_000);
    expect(decisionDeadlineMs(m, 'reasoning')).toBe(3 * 20_000 + 2_000);
    // Off: the local LLM answers decisions.
    const off = loadModelConfig({ NEATROOTS_DECISION_MODEL_URL: url, NEATROOTS_DECISION_MODEL_NAME: 'd', NEATROOTS_DECISION_MODEL: 'off', NEATROOTS_LLM_URL: url, NEATROOTS_LLM_MODEL: 'l', NEATROOTS_LLM_TIMEOUT_MS: '20000', NEATROOTS_QUESTION_RETRIES: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '0' });
    expect(decisionDeadlineMs(off, 'decision')).toBe(3 * 20_000 + 2_000);
  });

  it('a draft (one chat request) from the LLM the backend picks', () => {
    const env = { NEATROOTS_DECISION_MODEL_URL: url, NEATROOTS_DECISION_MODEL_NAME: 'd', NEATROOTS_DECISION_MODEL_TIMEOUT_MS: '10000', NEATROOTS_LLM_URL: url, NEATROOTS_LLM_MODEL: 'l', NEATROOTS_LLM_TIMEOUT_MS: '20000', NEATROOTS_QUESTION_RETRIES: '1', NEATROOTS_QUESTION_BATCH_WAIT_MS: '0' };
    expect(chatDeadlineMs(loadModelConfig(env))).toBe(2 * (2 * 10_000 + 30_000) + 2_000);
    expect(chatDeadlineMs(loadModelConfig({ ...env, NEATROOTS_CLASSIFIER_BACKEND: 'local' }))).toBe(2 * (2 * 20_000 + 30_000) + 2_000);
  });

  it('with no model configured in the calling process: the variables\' defaults (the local LLM\'s 60 s, the reasoning model\'s 120 s)', () => {
    const m = loadModelConfig({});
    expect(decisionDeadlineMs(m, 'decision')).toBe(3 * (3 * 60_000 + 2 * 30_000) + 10 + 2_000);
    expect(decisionDeadlineMs(m, 'reasoning')).toBe(3 * (3 * 120_000 + 2 * 30_000) + 10 + 2_000);
  });

  it('the client uses them per endpoint, or a fixed timeoutMs when given', () => {
    const models = loadModelConfig({ NEATROOTS_REASONING_MODEL_URL: url, NEATROOTS_REASONING_MODEL_NAME: 'r', NEATROOTS_REASONING_MODEL_TIMEOUT_MS: '600000' });
    const c = new QuestionDecisionsClient('127.0.0.1:9', { models });
    const fixed = new QuestionDecisionsClient('127.0.0.1:9', { models, timeoutMs: 5_000 });
    try {
      expect(c.deadlineMs('reasoning')).toBe(decisionDeadlineMs(models, 'reasoning'));
      expect(c.deadlineMs('decision')).toBe(decisionDeadlineMs(models, 'decision'));
      expect(fixed.deadlineMs('reasoning')).toBe(5_000);
    } finally {
      c.close();
      fixed.close();
    }
  });
});
