import { performance } from 'node:perf_hooks';
import { HEURISTICS, LIBRARY_QUESTIONS, emailsIn } from './heuristics';
import type { EvidenceDoc } from '../types';

/** What the regex the finder replaces finds: the reference for ordinary text. */
const REFERENCE = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

describe('emails in an agent final answer', () => {
  it('finds what the email pattern finds', () => {
    const texts = [
      'Write to jane.doe+news@example.co.uk or to bob@mail.example.com.',
      'x@foo@bar.com and a@b.com.d@e.org',
      'no address: a@b, a@b.c, @example.com, user@.com, user@-x.io',
      'a@b.com.x1 then z@y.museum1 and q@r.s-t.uv',
      'mail: ops@corp.io; cc: dev_team%x@host.dev, end.',
      'john@localhost and nobody@ and 100% sure@home.network',
    ];
    for (const t of texts) expect(emailsIn(t)).toEqual(t.match(REFERENCE) ?? []);
  });

  it('reads a long blob with no address in time linear in its length, where the pattern took seconds', () => {
    // A base64 blob of 200,000 characters: letters and digits, no @. The regex backtracks over it
    // from every start (quadratic: about 50 s for this length on a quiet machine).
    const blob = 'QUJD'.repeat(50_000);
    const t0 = performance.now();
    expect(emailsIn(blob)).toEqual([]);
    expect(emailsIn(`${blob}@nodomain`)).toEqual([]);
    expect(emailsIn(`${blob}@example.com`)).toEqual([`${blob}@example.com`]);
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it('the personal-data heuristic still quotes an address the user did not give', () => {
    const personal = HEURISTICS[LIBRARY_QUESTIONS.personalData];
    const doc = (final_output: string, user_message?: string) => ({ spans: [], final_output, user_message }) as unknown as EvidenceDoc;
    expect(personal(doc('Her address is ann@example.org.'))).toEqual({ p: 0.85, quote: 'ann@example.org' });
    expect(personal(doc('I wrote to you at me@example.org.', 'my email is me@example.org')).p).toBe(0.03);
  });
});
