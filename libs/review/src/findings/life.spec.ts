import { checkStat, findingState, isQuiet } from './life';

describe("the findings' life", () => {
  it('goes quiet at the third dismissal, and counts again below it', () => {
    expect([0, 1, 2, 3, 4].map(isQuiet)).toEqual([false, false, false, true, true]);
  });

  it('suggests retiring a noisy check only once it has enough findings', () => {
    expect(checkStat('c', 4, 3)).toMatchObject({ quiet: true, retire_suggested: false, precision: 0.25 });
    expect(checkStat('c', 6, 4)).toMatchObject({ quiet: true, retire_suggested: true });
    expect(checkStat('c', 6, 2)).toMatchObject({ quiet: false, retire_suggested: false });
    expect(checkStat('c', 0, 0).precision).toBeNull();
    expect(checkStat('c', 2, 3).precision).toBe(0);
  });

  it('is dismissed, resolved, active or open, in that order of precedence', () => {
    const t = '2025-01-01T00:00:00Z';
    expect(findingState({ status: 'resolved', active_at: t, dismissed_at: t })).toBe('dismissed');
    expect(findingState({ status: 'resolved', active_at: t, dismissed_at: null })).toBe('resolved');
    expect(findingState({ status: 'raised', active_at: t, dismissed_at: null })).toBe('active');
    expect(findingState({ status: 'updated', active_at: null, dismissed_at: null })).toBe('open');
  });
});
