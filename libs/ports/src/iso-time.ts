/** YYYY-MM-DD, or that with Thh:mm[:ss[.fff]] and an optional offset (Z, +hh:mm, +hhmm). */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** The instants a time may name: 0001-01-01 to the end of 9999, UTC (what Postgres and ISO-8601's four digits hold). */
const FIRST_MS = new Date(0).setUTCFullYear(1, 0, 1);
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * A strict ISO-8601 date or time: a day or time that does not exist (2026-02-31, 24:00) is
 * refused rather than rolled over, and a time without an offset is UTC (not the server's zone).
 * Year 0000, and an instant before 0001-01-01 or after 9999-12-31T23:59:59.999Z once its offset
 * is applied, are refused (null).
 */
export function parseIsoTime(v: string): number | null {
  const m = ISO_TIME.exec(v);
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', frac = '', zone] = m;
  const [Y, M, D, H, MI, S] = [y, mo, d, h, mi, sec].map(Number);
  if (M < 1 || M > 12 || D < 1 || H > 23 || MI > 59 || S > 59) return null;
  if (Y < 1) return null;
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(Y, M - 1, D);
  date.setUTCHours(H, MI, S, Number(`0.${frac || '0'}`) * 1000);
  const utc = date.getTime();
  if (date.getUTCDate() !== D) return null; // 2026-02-31
  let offset = 0;
  if (zone && zone !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    const [oh, om] = [Number(z[2]), Number(z[3])];
    if (oh > 23 || om > 59) return null;
    offset = (z[1] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const ms = utc - offset;
  return ms < FIRST_MS || ms > LAST_MS ? null : ms;
}
