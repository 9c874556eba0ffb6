import { MalformedAnswer, readModelAnswer } from './parse';

describe('readModelAnswer', () => {
  it('reads p, evidence and reason', () => {
    expect(readModelAnswer({ id: 'q1', p: 0.7, evidence: [{ turn: 3, quote: ' That dish is $12 ' }, { turn: '5' }, 4, { quote: 'no turn' }], reason: ' Gave a price. ' })).toEqual({
      p: 0.7,
      evidence: [
        { turn: 3, quote: 'That dish is $12', source: 'transcript' },
        { turn: 5, quote: null, source: 'transcript' },
        { turn: 4, quote: null, source: 'transcript' },
      ],
      reason: 'Gave a price.',
    });
  });

  it('takes what local models write instead', () => {
    expect(readModelAnswer({ p: '0.25' }).p).toBe(0.25);
    expect(readModelAnswer({ answer: 'yes' }).p).toBe(1);
    expect(readModelAnswer({ answer: false }).p).toBe(0);
  });

  it.each([[null], [[1]], [{ p: 2 }], [{ p: 'likely' }], [{ reason: 'no probability' }]])('refuses %j', (o) => {
    expect(() => readModelAnswer(o)).toThrow(MalformedAnswer);
  });
});
