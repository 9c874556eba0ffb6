import { DisabledChecks } from './disabled';
import { MatchWorker } from './pool';
import { SafeMatching } from './safe-matching';

/** What decides where a pattern runs, and what a disabled check does. The time limit itself: freeze.spec.ts. */
describe('SafeMatching', () => {
  let matching: SafeMatching;
  let disabled: DisabledChecks;
  beforeEach(() => {
    disabled = new DisabledChecks();
    matching = new SafeMatching({ disabled, warn: () => undefined });
  });
  afterEach(() => matching.close());

  const long = Buffer.from('x'.repeat(150_000) + ' refund issued');

  it('runs the library\'s patterns inline, whatever the text', () => {
    const m = matching.matcher({ id: 'lib', source: 'library' }, 'refund');
    expect(m.test(long)).toBe(true);
    expect(m.test(Buffer.from('nothing'))).toBe(false);
  });

  it('runs a user pattern inline when the call is provably cheap, and off the event loop when not', async () => {
    const m = matching.matcher({ id: 'mine', source: 'user' }, 'refund');
    expect(m.test(Buffer.from('a refund'))).toBe(true);
    expect(m.test('no')).toBe(false);
    const later = m.test(long);
    expect(later).toBeInstanceOf(Promise);
    await expect(later).resolves.toBe(true);
    await expect(m.test(Buffer.from('y'.repeat(150_000)))).resolves.toBe(false);
  });

  it('sends what one engine batch asks for in one message, answers in order', async () => {
    const run = jest.spyOn(MatchWorker.prototype, 'run');
    const a = matching.matcher({ id: 'a', source: 'project' }, 'refund');
    const b = matching.matcher({ id: 'b', source: 'database' }, '(?i)REFUND ISSUED$');
    const c = matching.matcher({ id: 'c', source: 'user' }, 'chargeback');
    const other = Buffer.from('z'.repeat(150_000) + ' chargeback');
    const answers = await Promise.all([a.test(long), b.test(long), c.test(long), c.test(other), a.test(other)]);
    expect(answers).toEqual([true, true, false, true, false]);
    expect(run).toHaveBeenCalledTimes(1);
    // The two texts went once each, however many patterns read them.
    expect(new Set(run.mock.calls[0][0].map((j) => j.text)).size).toBe(2);
    run.mockRestore();
  });

  it('skips a disabled check at once, also after a reload; a changed pattern runs again', () => {
    const before = matching.matcher({ id: 'slow', source: 'user' }, 'refund');
    disabled.add({ check_id: 'slow', pattern: 'refund', reason: 'slow', ms: 60, limit_ms: 50, since: '' });
    expect(before.test(long)).toBe(false);
    expect(matching.matcher({ id: 'slow', source: 'user' }, 'refund').test(Buffer.from('a refund'))).toBe(false);
    expect(matching.matcher({ id: 'slow', source: 'user' }, 'refunds?').test(Buffer.from('a refund'))).toBe(true);
    // Another check with the same pattern is not affected.
    expect(matching.matcher({ id: 'other', source: 'user' }, 'refund').test(Buffer.from('a refund'))).toBe(true);
  });

  it("keeps another project's check of the same id and pattern running when one project's is disabled", () => {
    const mine = matching.matcher({ id: 'pii', source: 'database', applies_to: { project: ['alpha'] } }, 'refund');
    const theirs = matching.matcher({ id: 'pii', source: 'database', applies_to: { project: ['beta'] } }, 'refund');
    disabled.add({ check_id: 'pii', pattern: 'refund', source: 'database', projects: ['alpha'], reason: 'slow', ms: 60, limit_ms: 50, since: '' });
    expect(mine.test(Buffer.from('a refund'))).toBe(false);
    expect(theirs.test(Buffer.from('a refund'))).toBe(true);
    expect(disabled.has('pii', 'refund', { projects: ['alpha'] })).toBe(true);
    expect(disabled.has('pii', 'refund', { projects: ['beta'] })).toBe(false);
  });

  it('refuses a pattern over the bounds when the check is compiled', () => {
    expect(() => matching.matcher({ id: 'big', source: 'user' }, '([a-z]{1,1000}x)'.repeat(50))).toThrow(/repeats something 1000 times/);
  });
});
