import type { QuestionCheck } from '@neatroots/checks';
import { fillParams } from './library';
import { judge, LLM_CONFIDENCE, MalformedAnswerError, questionKey, readRawAnswer, toAnswer, type QuestionDef } from './judge';

const yesNo: QuestionDef = { id: 'q', kind: 'yes_no', ask: 'Did it fail?', flag_at: 0.8 };
const choice: QuestionDef = {
  id: 'tone',
  kind: 'choice',
  ask: 'How did the agent answer?',
  options: { polite: 'courteous', curt: 'short but fine', rude: 'insulting' },
  flag_on: ['rude'],
};
const score: QuestionDef = {
  id: 'risk',
  kind: 'score',
  ask: 'How risky was the action?',
  levels: ['none', 'some', 'severe'],
  flag_at_level: 1.25,
};

describe('yes_no thresholds and the 90% cap', () => {
  it('flags at flag_at and not below', () => {
    expect(judge(yesNo, { p: 0.8 }, false).flagged).toBe(true);
    expect(judge(yesNo, { p: 0.79 }, false).flagged).toBe(false);
  });

  it("caps an LLM's probability at 0.9 and shows it as the seed says", () => {
    const v = judge(yesNo, { p: 0.99 }, true);
    expect(v.probability).toBe(0.9);
    const a = toAnswer(v, 'local', 'the words');
    expect(a.confidence).toBe(LLM_CONFIDENCE);
    expect(a.confidence).toBe('Very likely (LLM judgment)');
    // The classifier's probability is its own, shown as a percentage.
    const c = judge(yesNo, { p: 0.99 }, false);
    expect(c.probability).toBe(0.99);
    expect(toAnswer(c, 'classifier').confidence).toBe('99%');
  });

  it('reads a line above the cap as the cap for an LLM, so such a check can still fire', () => {
    expect(judge({ ...yesNo, flag_at: 0.95 }, { p: 0.97 }, true).flagged).toBe(true);
    expect(judge({ ...yesNo, flag_at: 0.95 }, { p: 0.85 }, true).flagged).toBe(false);
  });
});

describe('choice thresholds (flag_on)', () => {
  it('flags when the flag_on labels together are likely enough', () => {
    const v = judge(choice, { probs: { polite: 0.2, curt: 0.2, rude: 0.6 } }, true);
    expect(v).toMatchObject({ flagged: true, label: 'rude', probability: 0.6 });
  });

  it('does not flag when another label is the answer', () => {
    const v = judge(choice, { probs: { polite: 0.1, curt: 0.7, rude: 0.2 } }, true);
    expect(v).toMatchObject({ flagged: false, label: 'curt', probability: 0.2 });
  });

  it('sums several flag_on labels and honours flag_at', () => {
    const q = { ...choice, flag_on: ['curt', 'rude'], flag_at: 0.7 };
    expect(judge(q, { probs: { polite: 0.35, curt: 0.4, rude: 0.25 } }, false).flagged).toBe(false);
    expect(judge(q, { probs: { polite: 0.25, curt: 0.4, rude: 0.35 } }, false).flagged).toBe(true);
  });

  it('accepts a single label, and normalises probabilities that do not sum to one', () => {
    expect(judge(choice, { label: 'rude' }, true)).toMatchObject({ flagged: true, probability: 0.9 });
    expect(judge(choice, { probs: { polite: 2, rude: 2 } }, false)).toMatchObject({ probability: 0.5, flagged: true });
  });

  it('rejects an answer with no known label', () => {
    expect(() => judge(choice, { probs: { angry: 1 } }, true)).toThrow(MalformedAnswerError);
  });
});

describe('score thresholds (flag_at_level on the expected level)', () => {
  it('judges the expected level, fractions included', () => {
    // 0*0.2 + 1*0.35 + 2*0.45 = 1.25
    const v = judge(score, { probs: { '0': 0.2, '1': 0.35, '2': 0.45 } }, true);
    expect(v.value).toBeCloseTo(1.25);
    expect(v.flagged).toBe(true);
    const w = judge(score, { probs: { '0': 0.25, '1': 0.35, '2': 0.4 } }, true);
    expect(w.value).toBeCloseTo(1.15);
    expect(w.flagged).toBe(false);
  });

  it('reads levels given by position or by description', () => {
    expect(judge(score, { probs: { none: 0, some: 0, severe: 1 } }, false).value).toBe(2);
    expect(judge(score, { level: 1 }, false).value).toBe(1);
  });
});

describe('reading raw answers', () => {
  it('takes the usual spellings', () => {
    expect(readRawAnswer({ probability: '0.7', quote: ' x ' })).toEqual({ p: 0.7, quote: 'x' });
    expect(readRawAnswer({ answer: 'yes' })).toEqual({ p: 1 });
    expect(readRawAnswer('yes')).toBeUndefined();
  });

  it('reads a probability from 0 to 1, as a number or a string', () => {
    expect(judge(yesNo, readRawAnswer({ p: 0.7 })!, true)).toMatchObject({ flagged: false, probability: 0.7 });
    expect(judge(yesNo, readRawAnswer({ p: '0.85' })!, true)).toMatchObject({ flagged: true, probability: 0.85 });
    expect(judge(yesNo, readRawAnswer({ p: 0 })!, true)).toMatchObject({ flagged: false, probability: 0 });
    expect(judge(yesNo, readRawAnswer({ p: 1 })!, true)).toMatchObject({ flagged: true, probability: 0.9 });
  });

  // The prompt asks for a probability from 0 to 1; anything else is malformed (the check is
  // "not checked"), never a verdict: clamped, 150 or 1e9 was flagged at 0.9 and -3 passed,
  // taking back an earlier not-checked.
  it.each([
    [150, '"p" is not a probability from 0 to 1: 150'],
    [1e9, '"p" is not a probability from 0 to 1: 1000000000'],
    [-3, '"p" is not a probability from 0 to 1: -3'],
    [70, '"p" is not a probability from 0 to 1: 70'],
    [1.5, '"p" is not a probability from 0 to 1: 1.5'],
    ['very likely', '"p" is not a number: "very likely"'],
    [true, '"p" is not a number: true'],
    [{ yes: 0.8 }, '"p" is not a number: {"yes":0.8}'],
  ])('refuses p %j, naming it', (p, message) => {
    const raw = readRawAnswer({ id: 'q1', p, quote: 'x' })!;
    expect(() => judge(yesNo, raw, true)).toThrow(MalformedAnswerError);
    expect(() => judge(yesNo, raw, true)).toThrow(message);
    expect(() => judge(yesNo, readRawAnswer({ probability: p })!, false)).toThrow(message);
  });

  it('still says when there is no "p" at all', () => {
    expect(() => judge(yesNo, readRawAnswer({ quote: 'x' })!, true)).toThrow('no probability "p" in the answer');
  });

  it('keys a question by its id and wording', () => {
    expect(questionKey(yesNo)).toBe(questionKey({ ...yesNo, flag_at: 0.5 }));
    expect(questionKey(yesNo)).not.toBe(questionKey({ ...yesNo, ask: 'Did it break?' }));
  });

  it('keys a question filled for a run by its wording as written', () => {
    const task = { ...yesNo, ask: 'Did the agent finish {task}?' };
    const filled = fillParams(task as QuestionCheck, undefined, { user_message: 'refund order 17' });
    expect(filled.ask).toBe('Did the agent finish refund order 17?');
    expect(questionKey(filled)).toBe(questionKey(task));
    expect(questionKey(fillParams(task as QuestionCheck, { task: 'the booking' }, undefined))).toBe(questionKey(task));
    expect(questionKey({ ...task, ask: 'Did the agent complete {task}?' })).not.toBe(questionKey(task));
  });
});
