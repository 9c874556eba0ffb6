import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../config';
import { secretKeyOf } from './secret-key';

describe('NEATROOTS_SECRET_KEY and SOPOPS_PR_STATUS_CRON', () => {
  it('takes 64 hex digits or base64 of 32 bytes; anything else names the variable', () => {
    const hex = 'ab'.repeat(32);
    expect(loadConfig({ NEATROOTS_SECRET_KEY: hex }).NEATROOTS_SECRET_KEY).toEqual(Buffer.from(hex, 'hex'));
    const b64 = Buffer.alloc(32, 7).toString('base64');
    expect(loadConfig({ NEATROOTS_SECRET_KEY: b64 }).NEATROOTS_SECRET_KEY).toEqual(Buffer.alloc(32, 7));
    expect(() => loadConfig({ NEATROOTS_SECRET_KEY: 'hunter2' })).toThrow(/NEATROOTS_SECRET_KEY: expected 32 bytes/);
    expect(() => loadConfig({ NEATROOTS_SECRET_KEY: 'ab'.repeat(16) })).toThrow(ConfigError);
  });

  it('follows pull requests every 15 minutes unless told otherwise; a bad pattern names the variable', () => {
    expect(loadConfig({}).SOPOPS_PR_STATUS_CRON).toBe('*/15 * * * *');
    expect(loadConfig({ SOPOPS_PR_STATUS_CRON: '0 * * * *' }).SOPOPS_PR_STATUS_CRON).toBe('0 * * * *');
    expect(() => loadConfig({ SOPOPS_PR_STATUS_CRON: 'every 15 minutes' })).toThrow(/SOPOPS_PR_STATUS_CRON: cron pattern "every 15 minutes" must have five fields/);
    expect(() => loadConfig({ SOPOPS_PR_STATUS_CRON: '*/15 * * * * *' })).toThrow(/SOPOPS_PR_STATUS_CRON/);
  });
});

describe('secretKeyOf', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'secret-key-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('uses NEATROOTS_SECRET_KEY when set, writing nothing', () => {
    const key = Buffer.alloc(32, 1);
    expect(secretKeyOf({ NEATROOTS_SECRET_KEY: key, dataDir: dir })).toBe(key);
    expect(fs.existsSync(path.join(dir, 'secret-key'))).toBe(false);
  });

  it('embedded: makes a key once, 0600 in the data folder, and reuses it after a restart', () => {
    const first = secretKeyOf({ NEATROOTS_SECRET_KEY: undefined, dataDir: dir });
    expect(first).toHaveLength(32);
    const file = path.join(dir, 'secret-key');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(secretKeyOf({ NEATROOTS_SECRET_KEY: undefined, dataDir: dir })).toEqual(first);
  });

  it('a damaged key file stops the start, naming the file, instead of being replaced', () => {
    fs.writeFileSync(path.join(dir, 'secret-key'), 'not a key\n');
    expect(() => secretKeyOf({ NEATROOTS_SECRET_KEY: undefined, dataDir: dir })).toThrow(/secret-key: not a secret key/);
  });
});
