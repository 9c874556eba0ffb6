/**
 * deploy/local/services refuses a setting it cannot read before it starts anything: a prune age
 * that bash would read as 0 hours would delete the topics of runs still going.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { repoRoot } from './support';

const script = path.join(repoRoot, 'deploy/local/services');

describe('deploy/local/services up kafka', () => {
  it.each([
    ['NEATROOTS_KAFKA_PRUNE_HOURS', 'abc'],
    ['NEATROOTS_KAFKA_START_TIMEOUT', '2m'],
  ])('stops at %s=%s with a message naming it, and starts nothing', (name, value) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-services-'));
    try {
      const r = spawnSync(script, ['up', 'kafka'], { env: { PATH: process.env.PATH ?? '', HOME: os.homedir(), NEATROOTS_SERVICES_DIR: dir, [name]: value }, encoding: 'utf8' });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`${name} must be a whole number (seconds or hours), got '${value}'`);
      expect(fs.existsSync(path.join(dir, 'kafka', 'kafka.pid'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
