import { count, duration } from '../app/format';

describe('how the pages read a duration', () => {
  it('rounds first, so a value that rounds up reads in the next unit', () => {
    expect(duration(119_600)).toBe('2 min 0 s');
    expect(duration(59_999)).toBe('1 min 0 s');
    expect(duration(59_949)).toBe('59.9 s');
    expect(duration(9_996)).toBe('10.0 s');
    expect(duration(999.6)).toBe('1.00 s');
    expect(duration(60_499)).toBe('1 min 0 s');
    expect(duration(60_500)).toBe('1 min 1 s');
  });

  it('reads each unit as before', () => {
    expect(duration(0)).toBe('0 ms');
    expect(duration(999.4)).toBe('999 ms');
    expect(duration(1_234)).toBe('1.23 s');
    expect(duration(12_345)).toBe('12.3 s');
    expect(duration(61_000)).toBe('1 min 1 s');
    expect(duration(3_600_000)).toBe('60 min 0 s');
    expect(duration(undefined)).toBe('');
    expect(duration(Number.NaN)).toBe('');
  });

  it('counts in words: "1 error", "2 errors"', () => {
    expect(count(1, 'error')).toBe('1 error');
    expect(count(2, 'error')).toBe('2 errors');
  });
});
