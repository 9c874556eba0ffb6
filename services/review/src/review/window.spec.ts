import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { parseIsoTime, resolveWindow } from './window';

/**
 * The window's from and to: strict ISO-8601 (a day that does not exist is refused, not rolled
 * over), and a time without an offset is UTC whatever the server's zone (checked in a process
 * running in New York's zone, on the built service).
 */
describe('the review window', () => {
  it('refuses days and times that do not exist', () => {
    for (const v of ['2026-02-31', '2026-02-29', '2026-13-01', '2026-11-30T24:00', '2026-11-30T10:60', '2026-11-30T10:00:00+25:00', '30/11/2026', '2026-11-30 10:00']) expect(parseIsoTime(v)).toBeNull();
    expect(() => resolveWindow({ from: '2026-02-31', to: '2026-03-10' })).toThrow(/from must be an ISO-8601 date or time/);
  });

  it('reads dates, times and offsets', () => {
    expect(resolveWindow({ from: '2024-02-29', to: '2026-11-30T10:00:00.5+02:00' })).toEqual({ from: '2024-02-29T00:00:00.000Z', to: '2026-11-30T08:00:00.500Z' });
    expect(resolveWindow({ from: '2026-11-16T10:00', to: '2026-11-30T10:00:00-0130' })).toEqual({ from: '2026-11-16T10:00:00.000Z', to: '2026-11-30T11:30:00.000Z' });
  });

  it('reads a time without an offset as UTC, whatever the server zone', () => {
    const dist = path.join(__dirname, '../../dist/review/window.js');
    const out = execFileSync(process.execPath, ['-e', `console.log(JSON.stringify(require(${JSON.stringify(dist)}).resolveWindow({ from: '2026-11-16T10:00', to: '2026-11-30' })))`], {
      env: { ...process.env, TZ: 'America/New_York' },
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).toEqual({ from: '2026-11-16T10:00:00.000Z', to: '2026-11-30T00:00:00.000Z' });
  });
});
