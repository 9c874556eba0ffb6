import type { Session } from '../session';
import { agentQuotes } from './quotes';

const s: Session = {
  external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null,
  turns: [
    { role: 'user', text: 'How much is the lasagne?' },
    { role: 'agent', text: 'The lasagne is\n$14, a real treat.' },
  ],
  tool_calls: [],
};

describe('agentQuotes: only the agent\'s own words count', () => {
  it.each([
    ['a quote of the named agent turn, case and whitespace aside', { turn: 1, quote: 'the LASAGNE is $14' }, [{ turn: 1, quote: 'the LASAGNE is $14', source: 'transcript' }]],
    ['a quote with the wrong turn is moved to the agent turn that has it', { turn: 0, quote: '$14, a real treat' }, [{ turn: 1, quote: '$14, a real treat', source: 'transcript' }]],
    ['the user\'s words', { turn: 0, quote: 'How much is the lasagne' }, []],
    ['words nobody said', { turn: 1, quote: 'It costs $9' }, []],
    ['an empty quote', { turn: 1, quote: '  ' }, []],
    ['no quote', { turn: 1, quote: null }, []],
  ])('%s', (_what, e, expected) => {
    expect(agentQuotes([{ ...e, source: 'transcript' }], s)).toEqual(expected);
  });

  it('a tool call is not the agent\'s words', () => {
    expect(agentQuotes([{ turn: 1, quote: 'The lasagne', source: 'tool_calls' }], s)).toEqual([]);
  });
});
