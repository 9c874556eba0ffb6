/** YYYY-MM-DD, or that with Thh:mm[:ss[.fff]] and an optional offset (Z, +hh:mm, +hhmm). */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * A strict ISO-8601 date or time: a day or time that does not exist (2026-02-31, 24:00) is
 * refused rather than rolled over, and a time without an offset is UTC (not the server's zone).
 */
export function parseIsoTime(v: string): number | null {
  const m = ISO_TIME.exec(v);
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', frac = '', zone] = m;
  const [Y, M, D, H, MI, S] = [y, mo, d, h, mi, sec].map(Number);
  if (M < 1 || M > 12 || D < 1 || H > 23 || MI > 59 || S > 59) return null;
  const utc = Date.UTC(Y, M - 1, D, H, MI, S, Number(`0.${frac || '0'}`) * 1000);
  if (new Date(utc).getUTCDate() !== D) return null; // 2026-02-31
  let offset = 0;
  if (zone && zone !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    const [oh, om] = [Number(z[2]), Number(z[3])];
    if (oh > 23 || om > 59) return null;
    offset = (z[1] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  return utc - offset;
}
