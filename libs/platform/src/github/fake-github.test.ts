/**
 * A local HTTP server implementing the few GitHub REST endpoints the GitHub adapter uses
 * (git refs, contents, pulls) with GitHub's JSON shapes and status codes, repositories held
 * in memory, so the real adapter is tested over real HTTP. It can refuse a token, answer a
 * rate limit once, fail or hang requests, lose answers after doing what was asked, answer some
 * requests as told instead, and merge or close a pull on command. Named *.test.ts: a helper, neither
 * run by jest nor built.
 */
import { createHash } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

interface FakeRepo {
  /** branch -> commit sha */
  refs: Map<string, string>;
  /** commit sha -> files (path -> content) */
  commits: Map<string, Map<string, string>>;
  pulls: { number: number; head: string; base: string; title: string; body: string; state: 'open' | 'closed'; merged: boolean; merge_commit_sha: string | null }[];
}

export interface FakeGitHubRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test server reading what clients send
  body: any;
}

export interface FakeGitHub {
  /** The API base URL to give the adapter. */
  url: string;
  token: string;
  requests: FakeGitHubRequest[];
  /** A repository with one branch holding `files`. */
  addRepo(owner: string, repo: string, branch: string, files: Record<string, string>): void;
  fileAt(owner: string, repo: string, branch: string, path: string): string | undefined;
  /** A commit on `branch` setting one file (someone editing it on GitHub). */
  commitFile(owner: string, repo: string, branch: string, path: string, content: string): void;
  merge(owner: string, repo: string, number: number): void;
  close(owner: string, repo: string, number: number): void;
  /**
   * The next request is answered with a rate limit: `primary` (403, x-ratelimit-remaining 0 and
   * x-ratelimit-reset), `exhausted` (403, x-ratelimit-remaining 0 without a reset time) or
   * `secondary` (429, retry-after).
   */
  rateLimitOnce(kind: 'primary' | 'exhausted' | 'secondary', seconds: number): void;
  /** The next `n` requests get 502. */
  failNext(n: number): void;
  /**
   * The next request of `method` whose path matches `path` is carried out, but its answer is
   * lost: the client gets a 502 (GitHub did it; the answer never came back).
   */
  loseAnswerOnce(method: string, path: RegExp): void;
  /** As loseAnswerOnce, for the next `n` such requests (each carried out, each answered 502). */
  loseAnswers(method: string, path: RegExp, n: number): void;
  /**
   * The next `n` requests of `method` whose path matches `path` get `answer` instead, without
   * being carried out (a 403 for a token without a right, a rate limit on one endpoint).
   */
  answerNext(method: string, path: RegExp, answer: { status: number; body?: unknown; headers?: Record<string, string> }, n?: number): void;
  /** The branches of the repository. */
  branches(owner: string, repo: string): string[];
  /** A branch made from `from`'s head (someone, or an earlier version of neatroots, made it). */
  addBranch(owner: string, repo: string, name: string, from: string): void;
  /** The next `n` requests are never answered (a host that hangs). */
  hangNext(n: number): void;
  stop(): Promise<void>;
}

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

export async function startFakeGitHub(token = 'ghp_fake_token_0123456789'): Promise<FakeGitHub> {
  const repos = new Map<string, FakeRepo>();
  const requests: FakeGitHubRequest[] = [];
  let limit: { kind: 'primary' | 'exhausted' | 'secondary'; seconds: number } | null = null;
  let fail = 0;
  let hang = 0;
  const lose: { method: string; path: RegExp; n: number }[] = [];
  const answers: { method: string; path: RegExp; n: number; answer: { status: number; body?: unknown; headers?: Record<string, string> } }[] = [];
  const hung: http.ServerResponse[] = [];
  let url = '';

  const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  };
  const notFound = (res: http.ServerResponse) => send(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
  const blobSha = (content: string) => sha1(`blob ${Buffer.byteLength(content)}\0${content}`);
  const newCommit = (r: FakeRepo, files: Map<string, string>) => {
    const sha = sha1(`${Math.random()}${Date.now()}`);
    r.commits.set(sha, files);
    return sha;
  };

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
  const handle = (req: http.IncomingMessage, real: http.ServerResponse, body: any) => {
    const u = new URL(req.url ?? '/', 'http://x');
    requests.push({ method: req.method ?? '', path: u.pathname + u.search, headers: req.headers, body });
    if (hang > 0) {
      hang--;
      hung.push(real);
      return;
    }
    const canned = answers.find((a) => a.n > 0 && a.method === req.method && a.path.test(u.pathname));
    if (canned) {
      canned.n--;
      return send(real, canned.answer.status, canned.answer.body ?? { message: `HTTP ${canned.answer.status}` }, canned.answer.headers);
    }
    let res = real;
    const lost = lose.find((l) => l.n > 0 && l.method === req.method && l.path.test(u.pathname));
    if (lost) {
      lost.n--;
      // Carried out against a response nobody reads; the client gets a 502.
      res = { writeHead: () => res, end: () => res } as unknown as http.ServerResponse;
      send(real, 502, { message: 'Server Error' });
    }
    if (limit) {
      const l = limit;
      limit = null;
      if (l.kind === 'exhausted') return send(res, 403, { message: 'API rate limit exceeded' }, { 'x-ratelimit-remaining': '0' });
      if (l.kind === 'primary') {
        return send(res, 403, { message: 'API rate limit exceeded' }, {
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + l.seconds),
        });
      }
      return send(res, 429, { message: 'You have exceeded a secondary rate limit' }, { 'retry-after': String(l.seconds) });
    }
    if (fail > 0) {
      fail--;
      return send(res, 502, { message: 'Server Error' });
    }
    if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
    const m = /^\/api\/v3\/repos\/([^/]+)\/([^/]+)(?:\/(.*))?$/.exec(u.pathname); // GitHub Enterprise's prefix: the base URL is honoured
    const r = m ? repos.get(`${decodeURIComponent(m[1])}/${decodeURIComponent(m[2])}`) : undefined;
    if (!m || !r) return notFound(res);
    const [owner, name, rest] = [m[1], m[2], decodeURIComponent(m[3] ?? '')];
    const method = req.method;
    if (method === 'GET' && rest === '') return send(res, 200, { full_name: `${owner}/${name}`, default_branch: [...r.refs.keys()][0] });

    let g: RegExpExecArray | null;
    if (method === 'GET' && (g = /^git\/ref\/heads\/(.+)$/.exec(rest))) {
      const sha = r.refs.get(g[1]);
      if (!sha) return notFound(res);
      return send(res, 200, { ref: `refs/heads/${g[1]}`, object: { sha, type: 'commit' } });
    }
    if (method === 'GET' && (g = /^git\/matching-refs\/heads\/(.+)$/.exec(rest))) {
      const prefix = g[1];
      return send(res, 200, [...r.refs].filter(([b]) => b.startsWith(prefix)).map(([b, sha]) => ({ ref: `refs/heads/${b}`, object: { sha, type: 'commit' } })));
    }
    if (method === 'DELETE' && (g = /^git\/refs\/heads\/(.+)$/.exec(rest))) {
      if (!r.refs.delete(g[1])) return send(res, 422, { message: 'Reference does not exist' });
      // As GitHub: a pull request open from a deleted branch is closed.
      for (const p of r.pulls) if (p.head === g[1] && p.state === 'open') p.state = 'closed';
      res.writeHead(204);
      return res.end();
    }
    if (method === 'POST' && rest === 'git/refs') {
      const ref = String(body?.ref ?? '');
      // As GitHub: a name git refuses (e.g. "..") is a 422 too, not "already exists".
      if (!ref.startsWith('refs/heads/') || ref.includes('..') || !r.commits.has(body?.sha)) return send(res, 422, { message: 'Invalid request' });
      const branch = ref.slice('refs/heads/'.length);
      if (r.refs.has(branch)) return send(res, 422, { message: 'Reference already exists' });
      r.refs.set(branch, body.sha);
      return send(res, 201, { ref, object: { sha: body.sha, type: 'commit' } });
    }
    if ((g = /^contents\/(.+)$/.exec(rest))) {
      const path = g[1];
      if (method === 'GET') {
        const ref = u.searchParams.get('ref') ?? [...r.refs.keys()][0];
        const commit = r.commits.get(r.refs.get(ref) ?? ref);
        if (!commit) return send(res, 404, { message: `No commit found for the ref ${ref}` });
        const content = commit.get(path);
        if (content === undefined) {
          // A folder: its entries, as GitHub lists a directory.
          const inside = [...commit.keys()].filter((f) => f.startsWith(`${path}/`));
          if (inside.length) return send(res, 200, [...new Set(inside.map((f) => f.slice(path.length + 1).split('/')[0]))].map((n) => ({ name: n, path: `${path}/${n}` })));
          return notFound(res);
        }
        // As GitHub: over 1 MB, the sha without the content.
        if (Buffer.byteLength(content) > 1024 * 1024) return send(res, 200, { type: 'file', path, sha: blobSha(content), encoding: 'none', content: '' });
        return send(res, 200, { type: 'file', path, sha: blobSha(content), encoding: 'base64', content: Buffer.from(content).toString('base64') });
      }
      if (method === 'PUT') {
        const head = r.refs.get(body?.branch);
        if (!head) return send(res, 422, { message: `Branch ${body?.branch} not found` });
        const files = new Map(r.commits.get(head));
        const old = files.get(path);
        if (old !== undefined && body.sha !== blobSha(old)) return send(res, 409, { message: `${path} does not match ${body.sha}` });
        if (old === undefined && body.sha) return send(res, 422, { message: 'sha given for a new file' });
        files.set(path, Buffer.from(String(body.content), 'base64').toString('utf8'));
        const commit = newCommit(r, files);
        r.refs.set(body.branch, commit);
        return send(res, old === undefined ? 201 : 200, { content: { path, sha: blobSha(files.get(path)!) }, commit: { sha: commit, message: body.message } });
      }
    }
    if (method === 'POST' && rest === 'pulls') {
      if (!r.refs.has(body?.head) || !r.refs.has(body?.base)) return send(res, 422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', field: 'head', code: 'invalid' }] });
      if (r.pulls.some((p) => p.state === 'open' && p.head === body.head && p.base === body.base)) {
        return send(res, 422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${body.head}.` }] });
      }
      const number = r.pulls.length + 1;
      r.pulls.push({ number, head: body.head, base: body.base, title: body.title, body: body.body, state: 'open', merged: false, merge_commit_sha: null });
      return send(res, 201, pullJson(owner, name, r.pulls[number - 1]));
    }
    if (method === 'GET' && rest === 'pulls') {
      // ?head=owner:branch&state=open|closed|all&base=
      const head = u.searchParams.get('head');
      const state = u.searchParams.get('state') ?? 'open';
      const base = u.searchParams.get('base');
      const list = r.pulls.filter((p) => (!head || `${owner}:${p.head}` === head) && (state === 'all' || p.state === state) && (!base || p.base === base));
      return send(res, 200, list.map((p) => pullJson(owner, name, p)));
    }
    if (method === 'GET' && (g = /^pulls\/(\d+)$/.exec(rest))) {
      const p = r.pulls[Number(g[1]) - 1];
      return p ? send(res, 200, pullJson(owner, name, p)) : notFound(res);
    }
    return notFound(res);
  };

  const pullJson = (owner: string, name: string, p: FakeRepo['pulls'][number]) => ({
    number: p.number,
    state: p.state,
    merged: p.merged,
    merge_commit_sha: p.merge_commit_sha,
    title: p.title,
    body: p.body,
    head: { ref: p.head },
    base: { ref: p.base },
    html_url: `${url.replace(/\/api\/v3$/, '')}/${owner}/${name}/pull/${p.number}`,
  });

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      handle(req, res, text ? JSON.parse(text) : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`;

  const pull = (owner: string, repo: string, n: number) => {
    const p = repos.get(`${owner}/${repo}`)?.pulls[n - 1];
    if (!p) throw new Error(`no pull ${owner}/${repo}#${n}`);
    return p;
  };

  return {
    url,
    token,
    requests,
    addRepo(owner, repo, branch, files) {
      const r: FakeRepo = { refs: new Map(), commits: new Map(), pulls: [] };
      r.refs.set(branch, newCommit(r, new Map(Object.entries(files))));
      repos.set(`${owner}/${repo}`, r);
    },
    fileAt(owner, repo, branch, path) {
      const r = repos.get(`${owner}/${repo}`);
      return r?.commits.get(r.refs.get(branch) ?? '')?.get(path);
    },
    commitFile(owner, repo, branch, path, content) {
      const r = repos.get(`${owner}/${repo}`)!;
      const files = new Map(r.commits.get(r.refs.get(branch)!));
      files.set(path, content);
      r.refs.set(branch, newCommit(r, files));
    },
    merge(owner, repo, n) {
      const p = pull(owner, repo, n);
      const r = repos.get(`${owner}/${repo}`)!;
      const files = new Map(r.commits.get(r.refs.get(p.base)!));
      for (const [k, v] of r.commits.get(r.refs.get(p.head)!)!) files.set(k, v);
      const sha = newCommit(r, files);
      r.refs.set(p.base, sha);
      Object.assign(p, { state: 'closed', merged: true, merge_commit_sha: sha });
    },
    close(owner, repo, n) {
      pull(owner, repo, n).state = 'closed';
    },
    rateLimitOnce(kind, seconds) {
      limit = { kind, seconds };
    },
    failNext(n) {
      fail = n;
    },
    loseAnswerOnce(method, path) {
      lose.push({ method, path, n: 1 });
    },
    loseAnswers(method, path, n) {
      lose.push({ method, path, n });
    },
    answerNext(method, path, answer, n = 1) {
      answers.push({ method, path, n, answer });
    },
    branches(owner, repo) {
      return [...(repos.get(`${owner}/${repo}`)?.refs.keys() ?? [])];
    },
    addBranch(owner, repo, name, from) {
      const r = repos.get(`${owner}/${repo}`)!;
      r.refs.set(name, r.refs.get(from)!);
    },
    hangNext(n) {
      hang = n;
    },
    stop: () => {
      for (const res of hung.splice(0)) res.destroy();
      server.closeAllConnections?.();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
