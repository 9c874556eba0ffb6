import { CodeHostAuthError, CodeHostChangedError, CodeHostError, CodeHostNotFoundError } from '@neatroots/ports';
import { GitHubCodeHost, rateLimitWaitMs } from './github';
import { startFakeGitHub, type FakeGitHub } from './fake-github.test';

const repo = { owner: 'acme', repo: 'ops' };
const req = {
  repo,
  base: 'main',
  branch: 'neatroots/suggestion-1',
  path: 'procedures/refunds.md',
  content: '# Refunds\n\n1. Check the order.\n2. Ask for approval over 100 €.\n',
  message: 'Refunds: ask for approval over 100 €',
  title: 'Refunds: ask for approval',
  body: 'Suggested by neatroots from 12 sessions.',
};

describe('GitHubCodeHost against a local GitHub', () => {
  let gh: FakeGitHub;
  let host: GitHubCodeHost;
  beforeEach(async () => {
    gh = await startFakeGitHub();
    gh.addRepo('acme', 'ops', 'main', { 'procedures/refunds.md': '# Refunds\n\n1. Check the order.\n' });
    host = new GitHubCodeHost({ token: gh.token, baseUrl: gh.url, backoffMs: 10 });
  });
  afterEach(() => gh.stop());

  it('opens a pull request: a branch from main, the file committed on it, the pull, its url', async () => {
    const pr = await host.openPullRequest(req);
    expect(pr).toEqual({ number: 1, url: expect.stringMatching(/\/acme\/ops\/pull\/1$/), branch: 'neatroots/suggestion-1' });
    expect(gh.fileAt('acme', 'ops', 'neatroots/suggestion-1', req.path)).toBe(req.content);
    expect(gh.fileAt('acme', 'ops', 'main', req.path)).toBe('# Refunds\n\n1. Check the order.\n'); // main untouched until merged
    expect(await host.readFile(repo, 'neatroots/suggestion-1', req.path)).toBe(req.content);
    const h = gh.requests[0].headers;
    expect(h.authorization).toBe(`Bearer ${gh.token}`);
    expect(h.accept).toBe('application/vnd.github+json');
    expect(h['x-github-api-version']).toBe('2022-11-28');
    expect(await host.pullRequestState(repo, pr.number)).toEqual({ state: 'open' });
  });

  it('creates a file that does not exist yet', async () => {
    await host.openPullRequest({ ...req, path: 'procedures/new one.md' });
    expect(gh.fileAt('acme', 'ops', req.branch, 'procedures/new one.md')).toBe(req.content);
    expect(await host.readFile(repo, 'main', 'procedures/new one.md')).toBeNull();
  });

  it('a file over 1 MB is an error when read, not an empty file; it can still be replaced', async () => {
    gh.addRepo('acme', 'big', 'main', { 'procedures/huge.md': 'x'.repeat(1024 * 1024 + 1) });
    const big = { owner: 'acme', repo: 'big' };
    await expect(host.readFile(big, 'main', 'procedures/huge.md')).rejects.toThrow(/acme\/big.*procedures\/huge.md at main is over 1 MB/);
    await host.openPullRequest({ ...req, repo: big, path: 'procedures/huge.md', content: 'short\n' });
    expect(gh.fileAt('acme', 'big', req.branch, 'procedures/huge.md')).toBe('short\n');
  });

  it('with baseContent, branches from the commit whose file it matches; a file changed at base opens nothing', async () => {
    const base = '# Refunds\n\n1. Check the order.\n';
    const pr = await host.openPullRequest({ ...req, baseContent: base });
    expect(gh.fileAt('acme', 'ops', pr.branch, req.path)).toBe(req.content);
    // A file that is not there yet is compared as null.
    await host.openPullRequest({ ...req, branch: 'neatroots/new', path: 'procedures/new.md', baseContent: null });
    expect(gh.fileAt('acme', 'ops', 'neatroots/new', 'procedures/new.md')).toBe(req.content);

    // Someone edits the file on main after the content was made from it.
    gh.commitFile('acme', 'ops', 'main', req.path, `${base}2. Refund within 14 days.\n`);
    const before = gh.requests.length;
    const err = await host.openPullRequest({ ...req, branch: 'neatroots/suggestion-2', baseContent: base }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CodeHostChangedError);
    expect((err as Error).message).toBe('procedures/refunds.md changed on main of acme/ops while the pull request was being opened: apply again');
    // No branch, no commit, no pull: only reads were made.
    expect(gh.requests.slice(before).filter((r) => r.method !== 'GET')).toEqual([]);
    expect(gh.fileAt('acme', 'ops', 'neatroots/suggestion-2', req.path)).toBeUndefined();
    await expect(host.openPullRequest({ ...req, branch: 'neatroots/new-2', path: 'procedures/new.md', baseContent: 'a file that is not there' })).rejects.toBeInstanceOf(CodeHostChangedError);
  });

  it('with baseContent, each thing is read once: the file at the commit the branch is made from, not read again on the new branch', async () => {
    const asked = () => gh.requests.map((r) => `${r.method} ${r.path.replace('/api/v3/repos/acme/ops', '').replace(/ref=[0-9a-f]{40}/, 'ref=SHA')}`);
    await host.openPullRequest({ ...req, baseContent: '# Refunds\n\n1. Check the order.\n' });
    expect(asked()).toEqual([
      'GET /git/matching-refs/heads/neatroots/suggestion-1',
      'GET /git/ref/heads/main',
      'GET /contents/procedures/refunds.md?ref=SHA',
      'POST /git/refs',
      'PUT /contents/procedures/refunds.md',
      'POST /pulls',
    ]);
    gh.requests.length = 0;
    // A file new to the repository: its absence read once, the repository and folder not read again.
    await host.openPullRequest({ ...req, branch: 'neatroots/new', path: 'procedures/new.md', baseContent: null });
    expect(asked()).toEqual(['GET /git/matching-refs/heads/neatroots/new', 'GET /git/ref/heads/main', 'GET /contents/procedures/new.md?ref=SHA', 'POST /git/refs', 'PUT /contents/procedures/new.md', 'POST /pulls']);
    expect(gh.fileAt('acme', 'ops', 'neatroots/new', 'procedures/new.md')).toBe(req.content);
  });

  const made = () => gh.requests.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.path.replace('/api/v3/repos/acme/ops', '')}`);
  const pulls = async () => (await (await fetch(`${gh.url}/repos/acme/ops/pulls?state=all`, { headers: { authorization: `Bearer ${gh.token}` } })).json() as { number: number; state: string; head: { ref: string } }[]).map((p) => `#${p.number} ${p.state} ${p.head.ref}`);

  it('opened again for the same branch (a second apply): the pull request already opened, nothing made', async () => {
    const first = await host.openPullRequest(req);
    const before = gh.requests.length;
    expect(await host.openPullRequest(req)).toEqual(first);
    expect(gh.requests.slice(before).filter((r) => r.method !== 'GET')).toEqual([]);
  });

  it('opened again after its pull request was closed without merging: a new one is opened from the same branch, answered open; merged since: that one, merged', async () => {
    const first = await host.openPullRequest(req);
    gh.close('acme', 'ops', first.number);
    const again = await host.openPullRequest(req);
    expect(again).toEqual({ number: 2, url: expect.stringMatching(/\/acme\/ops\/pull\/2$/), branch: req.branch });
    expect(await pulls()).toEqual(['#1 closed neatroots/suggestion-1', '#2 open neatroots/suggestion-1']);
    expect(made().filter((m) => m.startsWith('POST /git/refs'))).toHaveLength(1); // the branch used again
    expect(await host.pullRequestState(repo, again.number)).toEqual({ state: 'open' });
    // Merged since: answered as it is, merged with its merge commit; nothing made.
    gh.merge('acme', 'ops', again.number);
    const before = gh.requests.length;
    expect(await host.openPullRequest(req)).toEqual({ ...again, merged: { mergeCommitSha: expect.stringMatching(/^[0-9a-f]{40}$/) } });
    expect(gh.requests.slice(before).filter((r) => r.method !== 'GET')).toEqual([]);
  });

  it('no answer to POST /pulls, and the branch has only a pull request closed before: not taken for the one just opened', async () => {
    const first = await host.openPullRequest(req);
    gh.close('acme', 'ops', first.number);
    gh.answerNext('POST', /\/pulls$/, { status: 502 }, 4); // never carried out
    await expect(host.openPullRequest(req)).rejects.toThrow(/gave up after 4 tries/);
    expect(await pulls()).toEqual(['#1 closed neatroots/suggestion-1']);
  });

  it('a pull request opened whose answer was lost on every try, and not found either: the branch is kept; opened again, that pull request is answered, not a second', async () => {
    gh.loseAnswers('POST', /\/pulls$/, 4); // the first opens it, the next three answer "already exists": all lost
    gh.loseAnswers('GET', /\/pulls$/, 4); // the look for it after: no answer either
    await expect(host.openPullRequest(req)).rejects.toThrow(/gave up after 4 tries/);
    expect(gh.branches('acme', 'ops')).toContain(req.branch); // deleting it would close the pull request
    const again = await host.openPullRequest(req);
    expect(again).toEqual({ number: 1, url: expect.stringMatching(/\/acme\/ops\/pull\/1$/), branch: req.branch });
    expect(await pulls()).toEqual(['#1 open neatroots/suggestion-1']);
    expect(made().filter((m) => m.startsWith('POST /git/refs'))).toHaveLength(1);
  });

  it('GitHub opened it but every answer to POST /pulls was lost: found by its branch, the branch kept', async () => {
    gh.loseAnswers('POST', /\/pulls$/, 4);
    expect(await host.openPullRequest(req)).toMatchObject({ number: 1, branch: req.branch });
    expect(await pulls()).toEqual(['#1 open neatroots/suggestion-1']);
  });

  it('a 403 on POST /pulls (a token without the pull requests right) leaves no branch, however often tried; with the right, the pull request is opened on the branch\'s own name', async () => {
    const noRight = { status: 403, body: { message: 'Resource not accessible by personal access token' } };
    gh.answerNext('POST', /\/pulls$/, noRight, 25);
    for (let i = 0; i < 25; i++) await expect(host.openPullRequest(req)).rejects.toBeInstanceOf(CodeHostAuthError);
    expect(gh.branches('acme', 'ops')).toEqual(['main']);
    // One branch made and deleted per try, not one more name each time.
    expect(made().filter((m) => m.startsWith('POST /git/refs'))).toHaveLength(25);
    expect(made().filter((m) => m.startsWith('DELETE /git/refs/heads/neatroots/suggestion-1'))).toHaveLength(25);
    expect(await host.openPullRequest(req)).toMatchObject({ number: 1, branch: req.branch });
    expect(gh.branches('acme', 'ops')).toEqual(['main', req.branch]);
  });

  it('a failure after the branch was made deletes it; one that could not be deleted is used again by the next try, not replaced by name-2', async () => {
    const limited = { status: 403, body: { message: 'API rate limit exceeded' }, headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + 3600) } };
    gh.answerNext('PUT', /\/contents\//, limited);
    await expect(host.openPullRequest(req)).rejects.toThrow(/rate limited for \d+ s more/);
    expect(gh.branches('acme', 'ops')).toEqual(['main']);

    // Rate limited for the commit and for the clean-up: the branch stays.
    gh.answerNext('PUT', /\/contents\//, limited);
    gh.answerNext('DELETE', /\/git\/refs\//, limited);
    await expect(host.openPullRequest(req)).rejects.toThrow(/rate limited/);
    expect(gh.branches('acme', 'ops')).toEqual(['main', req.branch]);
    const pr = await host.openPullRequest(req);
    expect(pr).toMatchObject({ number: 1, branch: req.branch });
    expect(gh.branches('acme', 'ops')).toEqual(['main', req.branch]);
    expect(gh.fileAt('acme', 'ops', req.branch, req.path)).toBe(req.content);
  });

  it('a branch left with the content already committed (its clean-up failed after the commit): used as it is, not committed again', async () => {
    gh.answerNext('POST', /\/pulls$/, { status: 403, body: { message: 'Resource not accessible by personal access token' } });
    gh.answerNext('DELETE', /\/git\/refs\//, { status: 502 }, 4);
    await expect(host.openPullRequest(req)).rejects.toBeInstanceOf(CodeHostAuthError);
    expect(gh.fileAt('acme', 'ops', req.branch, req.path)).toBe(req.content);
    const puts = made().filter((m) => m.startsWith('PUT')).length;
    expect(await host.openPullRequest(req)).toMatchObject({ number: 1, branch: req.branch });
    expect(made().filter((m) => m.startsWith('PUT')).length).toBe(puts);
  });

  it('a pull request an earlier version opened on name-2 (name taken then): that one is answered', async () => {
    await host.openPullRequest({ ...req, branch: `${req.branch}-2` });
    await host.openPullRequest({ ...req, branch: `${req.branch}-20`, path: 'procedures/other.md' });
    gh.close('acme', 'ops', 2);
    await host.openPullRequest({ ...req, branch: `${req.branch}0` }); // another name that only starts the same: not one of them
    expect(await host.openPullRequest(req)).toMatchObject({ number: 1, branch: `${req.branch}-2` });
  });

  it('opening deletes the name-N branches earlier versions left with no pull request open; never its own name, one with a pull request open, nor another name', async () => {
    const name = req.branch;
    gh.addBranch('acme', 'ops', `${name}-2`, 'main'); // a failed try of an earlier version
    await host.openPullRequest({ ...req, branch: `${name}-3` });
    gh.close('acme', 'ops', 1); // a pull request closed on GitHub
    await host.openPullRequest({ ...req, branch: `${name}-5` }); // #2, a second one an earlier version opened, still open
    for (const other of [`${name}0`, `${name}-x`, `${name}-2-1`, 'neatroots/suggestion-2', 'main-2']) gh.addBranch('acme', 'ops', other, 'main');
    const others = [`${name}0`, `${name}-x`, `${name}-2-1`, 'neatroots/suggestion-2', 'main-2'];

    // The open one is answered; the leftovers with none open go.
    expect(await host.openPullRequest(req)).toMatchObject({ number: 2, branch: `${name}-5` });
    expect(gh.branches('acme', 'ops')).toEqual(['main', `${name}-5`, ...others]);
    // Closed too: a new one from the name; the name-5 with its closed pull request goes.
    gh.close('acme', 'ops', 2);
    expect(await host.openPullRequest(req)).toMatchObject({ number: 3, branch: name });
    expect(gh.branches('acme', 'ops')).toEqual(['main', ...others, name]);
    expect(await pulls()).toEqual([`#1 closed ${name}-3`, `#2 closed ${name}-5`, `#3 open ${name}`]);
  });

  it('deleteLeftoverBranches: the name-N with no pull request open, but the one kept; the name itself and other names never', async () => {
    const name = req.branch;
    await host.openPullRequest({ ...req, branch: `${name}-2` }); // #1 open
    await host.openPullRequest({ ...req, branch: `${name}-3` }); // #2, closed below
    gh.close('acme', 'ops', 2);
    for (const b of [name, `${name}-4`, `${name}-7`, `${name}0`, 'other']) gh.addBranch('acme', 'ops', b, 'main');
    expect(await host.deleteLeftoverBranches(repo, name, `${name}-7`)).toEqual([`${name}-3`, `${name}-4`]);
    expect(gh.branches('acme', 'ops')).toEqual(['main', `${name}-2`, name, `${name}-7`, `${name}0`, 'other']);
    expect(await host.deleteLeftoverBranches(repo, name)).toEqual([`${name}-7`]);
    // GitHub failing on one delete: the others go all the same.
    gh.addBranch('acme', 'ops', `${name}-8`, 'main');
    gh.addBranch('acme', 'ops', `${name}-9`, 'main');
    gh.answerNext('DELETE', /-8$/, { status: 403, body: { message: 'Resource not accessible by personal access token' } });
    expect(await host.deleteLeftoverBranches(repo, name)).toEqual([`${name}-9`]);
  });

  it('a branch name GitHub refuses is an error saying so, not taken for one that exists', async () => {
    const err = await host.openPullRequest({ ...req, branch: 'bad..name' }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(CodeHostError);
    expect((err as Error).message).toMatch(/POST \/git\/refs \(branch bad\.\.name\): Invalid request/);
    expect(gh.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('reads merged (with the merge commit) and closed without merging', async () => {
    const a = await host.openPullRequest(req);
    const b = await host.openPullRequest({ ...req, branch: 'other' });
    gh.merge('acme', 'ops', a.number);
    gh.close('acme', 'ops', b.number);
    const merged = await host.pullRequestState(repo, a.number);
    expect(merged).toEqual({ state: 'merged', mergeCommitSha: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect(await host.pullRequestState(repo, b.number)).toEqual({ state: 'closed' });
    expect(await host.readFile(repo, 'main', req.path)).toBe(req.content);
  });

  it('a refused token is a typed error naming the repository, not retried', async () => {
    const bad = new GitHubCodeHost({ token: 'ghp_wrong', baseUrl: gh.url, backoffMs: 10 });
    const err = await bad.openPullRequest(req).catch((e) => e);
    expect(err).toBeInstanceOf(CodeHostAuthError);
    expect(err.message).toContain('acme/ops');
    expect(err.message).toContain('Bad credentials');
    expect(gh.requests).toHaveLength(1);
  });

  it('a missing repository or branch names what is missing', async () => {
    const noRepo = await host.openPullRequest({ ...req, repo: { owner: 'acme', repo: 'nope' } }).catch((e) => e);
    expect(noRepo).toBeInstanceOf(CodeHostNotFoundError);
    expect(noRepo.message).toContain('acme/nope');
    const noBranch = await host.openPullRequest({ ...req, base: 'release' }).catch((e) => e);
    expect(noBranch).toBeInstanceOf(CodeHostNotFoundError);
    expect(noBranch.message).toContain('branch release');
  });

  it('reading a file: null only when the repository, branch and folder are there; else what is missing', async () => {
    expect(await host.readFile(repo, 'main', 'procedures/new.md')).toBeNull();
    await expect(host.readFile({ owner: 'acme', repo: 'nope' }, 'main', 'procedures/refunds.md')).rejects.toThrow(/not found on the code host: repository acme\/nope/);
    await expect(host.readFile(repo, 'release', 'procedures/refunds.md')).rejects.toThrow(/not found on the code host: branch release/);
    await expect(host.readFile(repo, 'main', 'sop/refunds.md')).rejects.toThrow(/not found on the code host: folder sop on main \(repository acme\/ops\)/);
    await expect(host.readFile(repo, 'main', 'procedures/refunds.md/x.md')).rejects.toThrow(/procedures\/refunds.md on main is a file, not a folder/);
  });

  it('waits out a primary rate limit (403, x-ratelimit-reset) and retries', async () => {
    gh.rateLimitOnce('primary', 1);
    const t0 = Date.now();
    const pr = await host.openPullRequest(req);
    expect(pr.number).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250); // it waited for the reset, not hammered
    expect(gh.requests[0].path).toBe(gh.requests[1].path); // the same request again
  });

  it('waits out a secondary rate limit (429, retry-after) and retries', async () => {
    const pr = await host.openPullRequest(req);
    gh.merge('acme', 'ops', pr.number);
    gh.rateLimitOnce('secondary', 1);
    const t0 = Date.now();
    expect((await host.pullRequestState(repo, pr.number)).state).toBe('merged');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  });

  it('a rate limit longer than it may wait fails clearly instead of blocking', async () => {
    const impatient = new GitHubCodeHost({ token: gh.token, baseUrl: gh.url, maxWaitMs: 500 });
    gh.rateLimitOnce('secondary', 30);
    await expect(impatient.pullRequestState(repo, 1)).rejects.toThrow(/acme\/ops.*rate limited for 30 s/);
  });

  it('GitHub opened the pull request but its answer was lost: the retry finds that pull request instead of failing', async () => {
    gh.loseAnswerOnce('POST', /\/pulls$/);
    const pr = await host.openPullRequest(req);
    expect(pr).toEqual({ number: 1, url: expect.stringMatching(/\/acme\/ops\/pull\/1$/), branch: req.branch });
    expect(gh.requests.map((r) => `${r.method} ${r.path.replace(/\?.*/, '')}`).slice(-3)).toEqual(['POST /api/v3/repos/acme/ops/pulls', 'POST /api/v3/repos/acme/ops/pulls', 'GET /api/v3/repos/acme/ops/pulls']);
    expect(await host.pullRequestState(repo, 2).catch((e: Error) => e.message)).toMatch(/pull request #2/); // only one was opened
  });

  it('the commit was made but its answer was lost: the file is read again, not written again with a stale sha', async () => {
    gh.loseAnswerOnce('PUT', /\/contents\//);
    const pr = await host.openPullRequest(req);
    expect(pr.number).toBe(1);
    expect(gh.fileAt('acme', 'ops', req.branch, req.path)).toBe(req.content);
    expect(gh.requests.filter((r) => r.method === 'PUT')).toHaveLength(1);
  });

  it('a host that never answers: each request is given up after the timeout, as no answer, bounded', async () => {
    const quick = new GitHubCodeHost({ token: gh.token, baseUrl: gh.url, backoffMs: 10, attempts: 2, timeoutMs: 300 });
    gh.hangNext(2);
    const t0 = Date.now();
    await expect(quick.pullRequestState(repo, 1)).rejects.toThrow(/acme\/ops.*gave up after 2 tries: .*no answer in 0.3 s/);
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it('a 403 out of requests with no reset time is a rate limit (a minute), not a refused token', async () => {
    const impatient = new GitHubCodeHost({ token: gh.token, baseUrl: gh.url, maxWaitMs: 500 });
    gh.rateLimitOnce('exhausted', 0);
    const err = await impatient.pullRequestState(repo, 1).then(() => undefined, (e: Error) => e);
    expect(err).not.toBeInstanceOf(CodeHostAuthError);
    expect(err?.message).toMatch(/acme\/ops.*rate limited for 60 s more/);
  });

  it('retries 5xx a bounded number of times', async () => {
    gh.failNext(2);
    expect((await host.openPullRequest(req)).number).toBe(1);
    gh.failNext(10);
    await expect(host.pullRequestState(repo, 1)).rejects.toThrow(/gave up after 4 tries: HTTP 502/);
  });
});

describe('rateLimitWaitMs', () => {
  const res = (status: number, h: Record<string, string>) => ({ status, headers: { get: (n: string) => h[n] ?? null } });
  it('reads retry-after, then x-ratelimit-reset; a plain 403 is no rate limit', () => {
    expect(rateLimitWaitMs(res(429, { 'retry-after': '7' }))).toBe(7000);
    expect(rateLimitWaitMs(res(403, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '1010' }), 1_000_000)).toBe(10_250);
    expect(rateLimitWaitMs(res(403, { 'x-ratelimit-remaining': '12', 'x-ratelimit-reset': '1010' }))).toBeNull();
    expect(rateLimitWaitMs(res(403, {}))).toBeNull();
    // Out of requests with no (or no usable) reset time: a rate limit, a minute; not a refused token.
    expect(rateLimitWaitMs(res(403, { 'x-ratelimit-remaining': '0' }))).toBe(60_000);
    expect(rateLimitWaitMs(res(403, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': 'soon' }))).toBe(60_000);
    expect(rateLimitWaitMs(res(500, { 'retry-after': '1' }))).toBeNull();
  });
});
