import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const RUNTIME = path.resolve(__dirname, '../dist/runtime.js');

describe('a server that crashes', () => {
  it('says so in its own log format, with the error, and still ends as node would (exit 1)', () => {
    // As a server would meet it: a rejection nothing handles (an fs error carries no stack).
    const script = `
      const { cliLogger, logCrashes } = require(${JSON.stringify(RUNTIME)});
      const { loadConfig } = require('@neatroots/platform');
      logCrashes(cliLogger(loadConfig({ NEATROOTS_LOG_FORMAT: 'json' }), { err: (l) => process.stderr.write(l + '\\n') }));
      Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }));
      setTimeout(() => console.log('still running'), 2000);
    `;
    const r = spawnSync(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '../../..'), encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).not.toContain('still running');
    const line = r.stderr.split('\n').find((l) => l.startsWith('{'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({
      level: 'error',
      msg: 'crashed: a promise rejected and nothing handled it (a bug: please report it with this line); the process ends',
      err: { message: 'ENOSPC: no space left on device, write', code: 'ENOSPC' },
    });
  });
});
