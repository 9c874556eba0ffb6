import type { Db } from '@neatroots/ports';
import { GitHubConnections } from './github/connections';
import { githubConnections, type GitHubLink } from './module';

/**
 * Review without NEATROOTS_SECRET_KEY (a documented setting of the distributed deployment:
 * GitHub connections are off, suggestions are applied as drafts) says so in one warning line
 * naming the variable; it used to log an ERROR with a stack trace at every start.
 */
describe('GitHub connections without a secret key', () => {
  const db = {} as Db;
  const link = (key: Buffer | undefined): (() => Promise<GitHubLink>) => async () => ({ secretKey: () => key, hostFor: () => undefined }) as unknown as GitHubLink;

  it('are off, with one warning line naming NEATROOTS_SECRET_KEY', async () => {
    const warned: unknown[][] = [];
    const out = await githubConnections(db, link(undefined), (...args) => warned.push(args));
    expect(out).toBeNull();
    expect(warned).toEqual([[expect.stringMatching(/^GitHub connections are off \(suggestions are applied as drafts\): .*set NEATROOTS_SECRET_KEY/)]]);
  });

  it('are on with a key, and nothing is logged', async () => {
    const warned: unknown[] = [];
    const out = await githubConnections(db, link(Buffer.alloc(32, 1)), (m) => warned.push(m));
    expect(out).toBeInstanceOf(GitHubConnections);
    expect(warned).toEqual([]);
  });
});
