import { randomBytes } from 'node:crypto';
import type { Db } from '@neatroots/ports';
import { openTestDb, resetDb } from '../test-db.test';
import { RepoConnectionInputError, RepoConnectionsRepo } from './repo-connections.repo';
import { SecretKeyError } from './secret-box';

const TOKEN = 'ghp_s3cretTokenValue_9Zq7';
const conn = { owner: 'acme', repo: 'ops', branch: 'main', folder: 'procedures', api_url: 'https://github.example.com/api/v3' };

describe('RepoConnectionsRepo', () => {
  let db: Db;
  const key = randomBytes(32);
  beforeAll(async () => {
    db = await openTestDb();
  });
  afterAll(() => db.close());
  beforeEach(() => resetDb(db));

  it('keeps the token encrypted: the stored bytes do not contain it, reads give only a hint', async () => {
    const repo = new RepoConnectionsRepo(db, key);
    const saved = await repo.put('acme', { ...conn, token: TOKEN });
    expect(saved).toMatchObject({ ...conn, workspace: 'acme', has_token: true, token_hint: '…9Zq7' });
    expect(JSON.stringify(saved)).not.toContain(TOKEN);
    expect(JSON.stringify(await repo.get('acme'))).not.toContain(TOKEN);

    const raw = await db.query<{ token_encrypted: Uint8Array }>('SELECT token_encrypted FROM sop_repo_connections');
    const bytes = Buffer.from(raw.rows[0].token_encrypted);
    expect(bytes.length).toBeGreaterThan(TOKEN.length);
    expect(bytes.includes(Buffer.from(TOKEN))).toBe(false);
    expect(bytes.toString('latin1')).not.toContain('s3cret');

    expect((await repo.withToken('acme'))?.token).toBe(TOKEN);
  });

  it('a wrong secret key fails clearly, naming the workspace and the variable', async () => {
    await new RepoConnectionsRepo(db, key).put('acme', { ...conn, token: TOKEN });
    const other = new RepoConnectionsRepo(db, randomBytes(32));
    const err = await other.withToken('acme').catch((e) => e);
    expect(err).toBeInstanceOf(SecretKeyError);
    expect(err.message).toMatch(/GitHub token of workspace acme.*NEATROOTS_SECRET_KEY/);
    expect(await other.get('acme')).toMatchObject({ has_token: true }); // the rest stays readable
  });

  it('a later put without a token keeps the stored one; a first one without a token is refused', async () => {
    const repo = new RepoConnectionsRepo(db, key);
    await expect(repo.put('acme', conn)).rejects.toThrow(RepoConnectionInputError);
    await repo.put('acme', { ...conn, token: TOKEN });
    const moved = await repo.put('acme', { ...conn, branch: 'release', folder: '' });
    expect(moved).toMatchObject({ branch: 'release', folder: '', token_hint: '…9Zq7' });
    expect((await repo.withToken('acme'))?.token).toBe(TOKEN);
    await repo.put('acme', { ...conn, token: 'ghp_other_ABCD' });
    expect((await repo.withToken('acme'))?.token).toBe('ghp_other_ABCD');
  });

  it('deletes', async () => {
    const repo = new RepoConnectionsRepo(db, key);
    await repo.put('acme', { ...conn, token: TOKEN });
    expect(await repo.delete('acme')).toBe(true);
    expect(await repo.get('acme')).toBeNull();
    expect(await repo.withToken('acme')).toBeNull();
    expect(await repo.delete('acme')).toBe(false);
  });
});
