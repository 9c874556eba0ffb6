import type { Session } from '../session';
import { agentQuotes } from './quotes';

const s: Session = {
  external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null,
  turns: [
    { role: 'user', text: 'How much is the lasagne?' },
    { role: 'agent', text: 'The lasagne is\n$14, a real treat.' },
    { role: 'user', text: 'Can I pay by card?' },
    { role: 'agent', text: 'Sure!' },
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

  // A letter or a common word is in nearly every agent turn: quoting it shows nothing.
  it.each([
    ['one letter of the agent turn', { turn: 1, quote: 'e' }, []],
    ['a common word of it', { turn: 1, quote: 'the' }, []],
    ['two short words of it', { turn: 1, quote: 'lasagne is' }, []],
    ['three words of it', { turn: 1, quote: 'is $14, a' }, [{ turn: 1, quote: 'is $14, a', source: 'transcript' }]],
    ['twelve characters of it, one word', { turn: 1, quote: 'lasagne is $' }, [{ turn: 1, quote: 'lasagne is $', source: 'transcript' }]],
    ['the whole of a short agent turn, its punctuation aside', { turn: 3, quote: 'sure' }, [{ turn: 3, quote: 'sure', source: 'transcript' }]],
    ['the whole of a short turn named wrongly: moved to it', { turn: 0, quote: 'Sure!' }, [{ turn: 3, quote: 'Sure!', source: 'transcript' }]],
    ['part of a short agent turn', { turn: 3, quote: 'Sur' }, []],
    ['a short quote of no agent turn', { turn: 2, quote: 'card' }, []],
  ])('%s', (_what, e, expected) => {
    expect(agentQuotes([{ ...e, source: 'transcript' }], s)).toEqual(expected);
  });

  it('a tool call is not the agent\'s words', () => {
    expect(agentQuotes([{ turn: 1, quote: 'The lasagne', source: 'tool_calls' }], s)).toEqual([]);
  });
});
