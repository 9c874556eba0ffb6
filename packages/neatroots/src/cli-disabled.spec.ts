import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DisabledChecks, disabledChecksDir, recordDisabledChecks } from '@neatroots/checks';
import { main, type Io } from './cli';

/**
 * `checks list` runs in its own process, beside a running neatroots: a check that neatroots
 * disabled for a slow pattern must show there, with its reason, until neatroots stops.
 */
describe('checks list: checks disabled for a slow pattern', () => {
  let dir: string;
  let home: string;
  const pattern = '(?i)order [a-z]{1,200}x';

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-disabled-'));
    home = path.join(dir, 'home');
    fs.mkdirSync(path.join(home, 'checks'), { recursive: true });
    fs.writeFileSync(
      path.join(home, 'checks', 'slow.yaml'),
      `id: slow-order\nkind: rule\ntitle: slow order\nrule:\n  type: match\n  span: {}\n  pattern: '${pattern}'\naction: flag\n`,
    );
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function list(json = false): Promise<string[]> {
    const out: string[] = [];
    const io: Io = { out: (l) => out.push(l), err: () => undefined, env: { NEATROOTS_HOME: home }, cwd: dir };
    expect(await main(['checks', 'list', '--no-library', '--no-demo', ...(json ? ['--json'] : [])], io)).toBe(0);
    return out;
  }

  const disabled = (checkPattern = pattern) => {
    const d = new DisabledChecks();
    d.add({
      check_id: 'slow-order',
      pattern: checkPattern,
      source: 'user',
      reason: 'pattern took over 104 ms on one span (limit 50 ms); skipped until neatroots restarts',
      ms: 104,
      limit_ms: 50,
      since: '2026-01-02T03:04:05.000Z',
    });
    return d;
  };

  it('says so while the process that disabled it runs, and not after it stops', async () => {
    expect((await list()).join('\n')).not.toMatch(/disabled/);
    // This test's process stands for the running neatroots.
    const stop = recordDisabledChecks(home, disabled());
    try {
      const text = await list();
      const i = text.findIndex((l) => l.startsWith('slow-order '));
      expect(text[i + 1]).toBe('    disabled: pattern took over 104 ms on one span (limit 50 ms); skipped until neatroots restarts (since 2026-01-02T03:04:05.000Z)');
      const json = JSON.parse((await list(true)).join('\n'));
      expect(json.checks.find((c: { id: string }) => c.id === 'slow-order').disabled).toEqual({
        reason: 'pattern took over 104 ms on one span (limit 50 ms); skipped until neatroots restarts',
        since: '2026-01-02T03:04:05.000Z',
      });
    } finally {
      stop();
    }
    expect((await list()).join('\n')).not.toMatch(/disabled/);
  });

  it('ignores what a process that is gone left behind (a restart clears it)', async () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    fs.mkdirSync(disabledChecksDir(home), { recursive: true });
    fs.writeFileSync(path.join(disabledChecksDir(home), `${gone}.json`), JSON.stringify({ pid: gone, started_at: '', checks: disabled().list() }));
    expect((await list()).join('\n')).not.toMatch(/disabled/);
  });

  it('does not blame a check whose pattern changed since (the new pattern runs)', async () => {
    const stop = recordDisabledChecks(home, disabled('(?i)order [a-z]{1,150}x'));
    try {
      expect((await list()).join('\n')).not.toMatch(/disabled/);
    } finally {
      stop();
    }
  });
});
