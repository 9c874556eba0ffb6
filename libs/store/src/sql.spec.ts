import * as vm from 'node:vm';
import { iso } from './sql';

describe('iso', () => {
  it('keeps the milliseconds of a Date made in another realm (a vm context, as jest runs code in)', () => {
    const foreign = vm.runInNewContext('new Date(Date.UTC(2026, 11, 5, 7, 0, 0, 123))') as Date;
    expect(foreign instanceof Date).toBe(false);
    expect(iso(foreign)).toBe('2026-12-05T07:00:00.123Z');
  });

  it('reads a Date, a timestamp string and nothing', () => {
    expect(iso(new Date(Date.UTC(2026, 0, 1, 0, 0, 0, 7)))).toBe('2026-01-01T00:00:00.007Z');
    expect(iso('2026-01-01 00:00:00.25+00')).toBe('2026-01-01T00:00:00.250Z');
    expect(iso(null)).toBeNull();
    expect(iso(undefined)).toBeNull();
  });
});
