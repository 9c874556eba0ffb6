import { parseIsoTime } from './iso-time';

describe('parseIsoTime', () => {
  it('reads years 1-99 as themselves (Date.UTC read them as 1900-1999)', () => {
    expect(new Date(parseIsoTime('0050-06-01')!).toISOString()).toBe('0050-06-01T00:00:00.000Z');
    expect(new Date(parseIsoTime('0001-01-01T00:00:00Z')!).toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(new Date(parseIsoTime('0099-12-31T23:59:59.999Z')!).toISOString()).toBe('0099-12-31T23:59:59.999Z');
    expect(new Date(parseIsoTime('0004-02-29')!).toISOString()).toBe('0004-02-29T00:00:00.000Z');
    expect(parseIsoTime('0003-02-29')).toBeNull();
  });

  it('refuses year 0000 and instants outside 0001-01-01..9999-12-31T23:59:59.999Z UTC', () => {
    for (const v of ['0000-01-01', '0000-12-31T23:59:59Z', '0001-01-01T00:30:00+01:00', '9999-12-31T23:30:00-01:00']) expect([v, parseIsoTime(v)]).toEqual([v, null]);
    expect(new Date(parseIsoTime('9999-12-31T23:59:59.999Z')!).toISOString()).toBe('9999-12-31T23:59:59.999Z');
    expect(new Date(parseIsoTime('9999-12-31T22:59:59.999-01:00')!).toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });
});
