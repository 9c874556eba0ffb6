import { RepeatedErrors } from './repeats';

describe('RepeatedErrors', () => {
  it('logs an error once, then at most once a period with how many alike were kept quiet; other errors pass', () => {
    const r = new RepeatedErrors(30_000);
    expect(r.pass('events/review: ENOSPC', 0)).toBe(0);
    // retried every 200 ms for 10 s: nothing more logged
    for (let t = 200; t <= 10_000; t += 200) expect(r.pass('events/review: ENOSPC', t)).toBeUndefined();
    expect(r.pass('events/rule-engine: ENOSPC', 10_000)).toBe(0); // another consumer's
    expect(r.pass('events/review: ENOSPC', 30_000)).toBe(50); // a period on: logged, with the 50 kept quiet
    expect(r.pass('events/review: ENOSPC', 30_200)).toBeUndefined();
    expect(r.pass('events/review: ENOSPC', 60_000)).toBe(1);
    expect(RepeatedErrors.suffix(0)).toBe('');
    expect(RepeatedErrors.suffix(50)).toBe(' (50 more alike since the last such line, not logged)');
  });

  it('keeps a bounded number of errors apart (errors carrying ids vary without end)', () => {
    const r = new RepeatedErrors(30_000, 3);
    for (let i = 0; i < 3; i++) expect(r.pass(`e${i}`, 0)).toBe(0);
    expect(r.pass('e0', 1)).toBeUndefined();
    expect(r.pass('e3', 2)).toBe(0); // past the bound: the others forgotten
    expect(r.pass('e0', 3)).toBe(0);
  });
});
