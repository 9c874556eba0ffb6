import { randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, InlineJobs } from '@neatroots/platform';
import { SopError } from '@neatroots/store';
import { transitionForPullRequest, type SuggestionTransition } from '@neatroots/review-domain';
import { startFakeGitHub, type FakeGitHub } from '../../../../libs/platform/src/github/fake-github.test';
import { recordSchedules, useMigratedDb } from '../sop-fixtures.test';
import { GitHubConnections } from './connections';
import { followPullRequests, PR_STATUS_QUEUE, PR_STATUS_SCHEDULE, schedulePrStatus, type FollowedPullRequest, type PullRequestsToFollow } from './pr-status';

let db: Db;
let gh: FakeGitHub;
let connections: GitHubConnections;

useMigratedDb((d) => (db = d), 'sop_repo_connections');
beforeEach(async () => {
  gh = await startFakeGitHub();
  gh.addRepo('acme', 'ops', 'main', { 'procedures/refunds.md': '# Refunds\n' });
  connections = new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10 }));
});
afterEach(() => gh.stop());

const connect = (ws: string, token = gh.token) => connections.put(ws, { repository: 'acme/ops', branch: 'main', path: 'procedures/', api_url: gh.url, token });

describe('GitHub connections', () => {
  it('keeps the connection; no answer carries the token', async () => {
    const put = await connect('acme');
    expect(put).toEqual({ repository: 'acme/ops', branch: 'main', path: 'procedures', api_url: gh.url, has_token: true, token_hint: `…${gh.token.slice(-4)}`, updated_at: expect.any(String) });
    const got = await connections.get('acme');
    for (const answer of [put, got]) expect(JSON.stringify(answer)).not.toContain(gh.token);
  });

  it('opens a pull request through the connection, the real adapter talking to GitHub', async () => {
    await connect('acme');
    const c = (await connections.codeHost('acme'))!;
    const pr = await c.host.openPullRequest({ repo: c.repo, base: c.branch, branch: 'neatroots/s1', path: `${c.folder}/refunds.md`, content: '# Refunds\n\nAsk first.\n', message: 'm', title: 't', body: 'b' });
    expect(pr.url).toMatch(/\/acme\/ops\/pull\/1$/);
    expect(gh.fileAt('acme', 'ops', 'neatroots/s1', 'procedures/refunds.md')).toBe('# Refunds\n\nAsk first.\n');
  });

  it('refuses bad bodies naming the field; a first connection needs a token', async () => {
    const refuse = (body: unknown) => connections.put('acme', body).catch((e: SopError) => `${e.status} ${e.message}`);
    expect(await refuse({ repository: 'acme' })).toMatch(/^400 repository must be "owner\/repo"/);
    expect(await refuse({ repository: 'acme/ops', branch: 'a b' })).toMatch(/^400 branch "a b"/);
    expect(await refuse({ repository: 'acme/ops', path: '../etc' })).toMatch(/^400 path/);
    expect(await refuse({ repository: 'acme/ops', api_url: 'ftp://x' })).toMatch(/^400 api_url/);
    expect(await refuse({ repository: 'acme/ops', tokn: 'x' })).toMatch(/^400 unknown field tokn/);
    expect(await refuse({ repository: 'acme/ops' })).toMatch(/^400 .*token is required/);
    await expect(connections.get('acme')).rejects.toMatchObject({ status: 404 });
  });

  it('keeps the stored token for a new branch or folder, never for another host or repository', async () => {
    await connect('acme');
    // Someone with the workspace's key points the connection at a host of their own, without the token.
    const seen: string[] = [];
    const elsewhere = http.createServer((req, res) => {
      seen.push(String(req.headers.authorization));
      res.writeHead(404).end('{}');
    });
    await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', r));
    try {
      const other = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
      const refuse = (body: unknown) => connections.put('acme', body).catch((e: SopError) => `${e.status} ${e.message}`);
      expect(await refuse({ repository: 'acme/ops', api_url: other })).toMatch(/^400 token is required when the repository or api_url changes/);
      expect(await refuse({ repository: 'acme/other', api_url: gh.url })).toMatch(/^400 token is required/);
      // api_url left out is GitHub.com: not where the token was given for either.
      expect(await refuse({ repository: 'acme/ops' })).toMatch(/^400 token is required/);
      const c = (await connections.codeHost('acme'))!;
      expect(c.apiUrl).toBe(gh.url);
      expect(await c.host.readFile(c.repo, c.branch, 'procedures/refunds.md')).toBe('# Refunds\n');
      expect(seen).toEqual([]);
      // Another branch or folder of the same repository keeps it; a new token may go anywhere.
      expect(await connections.put('acme', { repository: 'acme/ops', api_url: gh.url, branch: 'release', path: 'sops' })).toMatchObject({ branch: 'release', path: 'sops', has_token: true });
      expect(await connections.put('acme', { repository: 'acme/other', api_url: other, token: 'ghp_other_5678' })).toMatchObject({ repository: 'acme/other', token_hint: '…5678' });
    } finally {
      elsewhere.close();
    }
  });

  it('defaults: branch main, folder procedures, GitHub.com; delete removes it', async () => {
    const c = await connections.put('acme', { repository: 'acme/ops', token: 'ghp_x_1234' });
    expect(c).toMatchObject({ branch: 'main', path: 'procedures', api_url: 'https://api.github.com' });
    expect(await connections.delete('acme')).toEqual({ deleted: true });
    expect(await connections.codeHost('acme')).toBeNull();
    await expect(connections.delete('acme')).rejects.toMatchObject({ status: 404 });
  });
});

describe('pull request follow-up', () => {
  it('maps merged to merged, closed unmerged to dismissed "PR closed", open to nothing', () => {
    expect(transitionForPullRequest({ state: 'merged', mergeCommitSha: 'abc' })).toEqual({ to: 'merged', mergeCommitSha: 'abc' });
    expect(transitionForPullRequest({ state: 'closed' })).toEqual({ to: 'dismissed', note: 'PR closed' });
    expect(transitionForPullRequest({ state: 'open' })).toBeNull();
  });

  /** What the suggestions code will implement: a list, and the transitions it was told. */
  function memoryPrs(list: FollowedPullRequest[]): PullRequestsToFollow & { settled: [string, SuggestionTransition][] } {
    const settled: [string, SuggestionTransition][] = [];
    return { settled, open: () => list, settle: async (pr, t) => void settled.push([pr.suggestionId, t]) };
  }

  it('one pass: merged and closed pull requests settle, open ones wait, a refused token is reported and the rest go on', async () => {
    await connect('acme');
    await connect('broken', 'ghp_revoked');
    const c = (await connections.codeHost('acme'))!;
    const open = (branch: string) => c.host.openPullRequest({ repo: c.repo, base: 'main', branch, path: 'procedures/refunds.md', content: `# ${branch}\n`, message: 'm', title: 't', body: 'b' });
    const [a, b, d] = [await open('s-a'), await open('s-b'), await open('s-d')];
    gh.merge('acme', 'ops', a.number);
    gh.close('acme', 'ops', b.number);
    const prs = memoryPrs([
      { workspace: 'acme', suggestionId: 'A', number: a.number },
      { workspace: 'broken', suggestionId: 'X', number: 1 },
      { workspace: 'acme', suggestionId: 'B', number: b.number },
      { workspace: 'acme', suggestionId: 'D', number: d.number },
    ]);
    const report = await followPullRequests({ prs, codeHostOf: (ws) => connections.codeHost(ws) });
    expect(prs.settled).toEqual([
      ['A', { to: 'merged', mergeCommitSha: expect.stringMatching(/^[0-9a-f]{40}$/) }],
      ['B', { to: 'dismissed', note: 'PR closed' }],
    ]);
    expect(report).toMatchObject({ checked: 4, settled: 2 });
    expect(report.failed).toEqual([expect.stringMatching(/suggestion X \(broken, pull request #1\): .*refused the token for acme\/ops/)]);
  });

  it('registers sopops_pr_status on the cron given, and the job runs the pass', async () => {
    const jobs = new InlineJobs();
    const scheduled = recordSchedules(jobs);
    try {
      await connect('acme');
      const c = (await connections.codeHost('acme'))!;
      const pr = await c.host.openPullRequest({ repo: c.repo, base: 'main', branch: 's', path: 'procedures/x.md', content: 'x\n', message: 'm', title: 't', body: 'b' });
      gh.close('acme', 'ops', pr.number);
      const prs = memoryPrs([{ workspace: 'acme', suggestionId: 'S', number: pr.number }]);
      await schedulePrStatus(jobs, '*/15 * * * *', { prs, codeHostOf: (ws) => connections.codeHost(ws) });
      expect(scheduled).toEqual([[PR_STATUS_QUEUE, PR_STATUS_SCHEDULE, '*/15 * * * *']]);
      expect(PR_STATUS_QUEUE).toBe('sopops_pr_status');
      await jobs.run(PR_STATUS_QUEUE, {});
      expect(prs.settled).toEqual([['S', { to: 'dismissed', note: 'PR closed' }]]);
      const other = new InlineJobs();
      await expect(schedulePrStatus(other, 'every 15 minutes', { prs, codeHostOf: async () => null })).rejects.toThrow(/five fields/);
      await other.close();
    } finally {
      await jobs.close();
    }
  });
});
