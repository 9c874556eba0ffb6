import { ModelError } from '@neatroots/ports';
import { MalformedAnswerError } from '@neatroots/questions';
import { modelFailureLine, modelRequestWatch } from './model-health';

describe('modelRequestWatch: a failing model on /metrics and in the log', () => {
  function watch() {
    let t = 1_000_000;
    const counted: string[] = [];
    const warned: { msg: string; fields: Record<string, unknown> }[] = [];
    const on = modelRequestWatch({ counter: { inc: (l) => counted.push(`${l.endpoint}/${l.outcome}`) }, warn: (msg, fields) => warned.push({ msg, fields }), now: () => t });
    return { on, counted, warned, advance: (ms: number) => (t += ms) };
  }

  it('counts every request, and says a failing endpoint once a minute, then with the count of those not said', () => {
    const w = watch();
    const refused = new ModelError('rejected', 'HTTP 401: Incorrect API key provided: [model key].', 401);
    w.on('decision', 'ok');
    w.on('decision', 'rejected', refused);
    w.on('decision', 'rejected', refused);
    w.on('local', 'timeout', new ModelError('timeout', 'no answer within 3000 ms'));
    w.on('decision', 'aborted', new ModelError('aborted', 'the request was aborted'));
    w.advance(30_000);
    w.on('decision', 'server', new ModelError('server', 'HTTP 500: upstream 500', 500));
    w.advance(30_000);
    w.on('decision', 'rate_limited', new ModelError('rate_limited', 'HTTP 429: Rate limit reached', 429));
    expect(w.counted).toEqual(['decision/ok', 'decision/rejected', 'decision/rejected', 'local/timeout', 'decision/aborted', 'decision/server', 'decision/rate_limited']);
    expect(w.warned).toEqual([
      { msg: 'the decision model rejected requests (HTTP 401): Incorrect API key provided: [model key]; what was asked of it is not checked or answered', fields: { endpoint: 'decision', outcome: 'rejected', status: 401 } },
      { msg: 'the local model timed out: no answer within 3000 ms; what was asked of it is not checked or answered', fields: { endpoint: 'local', outcome: 'timeout' } },
      {
        msg: 'the decision model rate-limited requests (HTTP 429): Rate limit reached; what was asked of it is not checked or answered (2 more failed requests to it since the last such line, not logged)',
        fields: { endpoint: 'decision', outcome: 'rate_limited', status: 429 },
      },
    ]);
  });

  it('words each outcome', () => {
    expect(modelFailureLine('decision', 'connection', new ModelError('connection', 'cannot reach the model: Connection error.'))).toBe('the decision model could not be reached: cannot reach the model: Connection error');
    expect(modelFailureLine('local', 'malformed', new MalformedAnswerError('the reply has no answer for this question'))).toBe('the local model gave replies that could not be read: the reply has no answer for this question');
    expect(modelFailureLine('reasoning', 'server', new Error('boom'))).toBe('the reasoning model failed requests: boom');
  });
});
