import { randomBytes } from 'node:crypto';
import type { Db } from '@neatroots/ports';
import { useMigratedDb } from '../sop-fixtures.test';
import { apiUrlRefusal, GitHubConnections } from './connections';

describe('the REST APIs a GitHub connection may name', () => {
  it('by default: any https API but one on a loopback, private or link-local address', () => {
    for (const ok of ['https://api.github.com', 'https://github.example.com/api/v3', 'https://8.8.8.8/api/v3', 'https://[2001:db8::1]/api']) {
      expect(apiUrlRefusal(ok, 'public')).toBeNull();
    }
    for (const inside of [
      'https://127.0.0.1/api/v3',
      'https://127.1.2.3:8443',
      'https://10.0.0.7/api/v3',
      'https://172.20.1.1/api',
      'https://192.168.1.10/api',
      'https://169.254.169.254/latest', // a cloud's metadata address
      'https://100.64.0.1/api',
      'https://0.0.0.0/api',
      'https://[::1]/api',
      'https://[fd00::5]/api',
      'https://[fe80::1]/api',
      'https://[::ffff:127.0.0.1]/api',
      'https://[::ffff:a00:7]/api',
      'https://localhost/api/v3',
      'https://admin.localhost/api',
    ]) {
      expect(apiUrlRefusal(inside, 'public')).toMatch(/is a loopback, private or link-local address; allowed only when NEATROOTS_GITHUB_API_URLS names it/);
    }
    expect(apiUrlRefusal('http://github.example.com/api/v3', 'public')).toMatch(/api_url must be https/);
  });

  it('with NEATROOTS_GITHUB_API_URLS: those (http and loopback included) and api.github.com, nothing else', () => {
    const allowed = ['http://127.0.0.1:3000/', 'https://ghe.internal/api/v3'];
    expect(apiUrlRefusal('http://127.0.0.1:3000', allowed)).toBeNull();
    expect(apiUrlRefusal('https://ghe.internal/api/v3', allowed)).toBeNull();
    expect(apiUrlRefusal('https://api.github.com', allowed)).toBeNull();
    expect(apiUrlRefusal('https://github.example.com/api/v3', allowed)).toBe(
      'api_url https://github.example.com/api/v3 is not one this deployment allows (NEATROOTS_GITHUB_API_URLS: https://api.github.com, http://127.0.0.1:3000/, https://ghe.internal/api/v3)',
    );
  });

  describe('a connection', () => {
    let db: Db;
    useMigratedDb((d) => (db = d), 'sop_repo_connections');

    it('is refused with 400 naming the address, and one stored before the setting narrowed is not used', async () => {
      const key = randomBytes(32);
      const stored = await new GitHubConnections(db, key, () => ({}) as never).put('w1', { repository: 'acme/ops', api_url: 'http://127.0.0.1:9464', token: 'ghp_secret' });
      expect(stored.api_url).toBe('http://127.0.0.1:9464');

      const narrowed = new GitHubConnections(db, key, () => ({ used: true }) as never, 'public');
      await expect(narrowed.put('w2', { repository: 'acme/ops', api_url: 'http://127.0.0.1:9464', token: 'ghp_secret' })).rejects.toMatchObject({
        status: 400,
        code: 'invalid_body',
        message: 'api_url must be https (got http://127.0.0.1:9464); an http API is allowed only when NEATROOTS_GITHUB_API_URLS names it',
      });
      await expect(narrowed.codeHost('w1')).rejects.toMatchObject({ status: 409, code: 'github_api_refused', message: expect.stringContaining("workspace w1's GitHub connection: api_url must be https") });
      expect(await narrowed.put('w2', { repository: 'acme/ops', api_url: 'https://github.example.com/api/v3', token: 'ghp_secret' })).toMatchObject({ api_url: 'https://github.example.com/api/v3' });
    });
  });
});
