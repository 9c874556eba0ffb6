import { BlockList, isIP } from 'node:net';
import { GITHUB_API_DEFAULT, type CodeHost, type Db, type RepoRef } from '@neatroots/ports';
import { RepoConnectionInputError, RepoConnectionsRepo, SopError, type RepoConnection, type RepoConnectionInput } from '@neatroots/store';

/** A workspace's GitHub connection as the API answers it: never the token, only whether one is kept and its last four characters. */
export interface GitHubConnectionView {
  repository: string;
  branch: string;
  /** The procedures folder in the repository ('' for its root). */
  path: string;
  api_url: string;
  has_token: boolean;
  token_hint: string;
  updated_at: string;
}

const FIELDS = ['repository', 'branch', 'path', 'api_url', 'token'];
const REPOSITORY = /^([A-Za-z0-9][A-Za-z0-9-]{0,38})\/([A-Za-z0-9._-]{1,100})$/;

const bad = (message: string) => new SopError(400, 'invalid_body', message);

/**
 * Workspaces' GitHub connections (PUT/GET/DELETE /v1/workspaces/{ws}/github): where an applied
 * suggestion opens its pull request. Checks bodies field by field, so every transport refuses
 * the same things; gives the code host of a workspace to the apply and the PR follow-up.
 */
export class GitHubConnections {
  private readonly repo: RepoConnectionsRepo;

  constructor(
    db: Db,
    secretKey: Buffer,
    /** The adapter for a connection: `new GitHubCodeHost({ token, baseUrl: api_url })` from @neatroots/platform. */
    private readonly hostFor: (c: { token: string; api_url: string }) => CodeHost,
    /**
     * Which REST APIs a connection may name (NEATROOTS_GITHUB_API_URLS, by the composition root):
     * `public` any https URL but one on a loopback, private or link-local address, `https://api.github.com`
     * always; a list, those URLs and `https://api.github.com` only. Left out, any http(s) URL (tests of the class).
     */
    private readonly apiUrls: GitHubApiUrls = 'any',
  ) {
    this.repo = new RepoConnectionsRepo(db, secretKey);
  }

  async put(workspace: string, body: unknown): Promise<GitHubConnectionView> {
    const input = parseBody(body);
    const refused = apiUrlRefusal(input.api_url, this.apiUrls);
    if (refused) throw bad(refused);
    if (input.token === undefined) {
      // The stored token goes only where it was given for: a new host or repository needs its own.
      const kept = await this.repo.get(workspace);
      if (kept && (kept.api_url !== input.api_url || kept.owner !== input.owner || kept.repo !== input.repo)) {
        const was = `${kept.owner}/${kept.repo} at ${kept.api_url}`;
        throw bad(`token is required when the repository or api_url changes (the stored token was given for ${was}; it is never sent anywhere else)`);
      }
    }
    try {
      return view(await this.repo.put(workspace, input));
    } catch (err) {
      if (err instanceof RepoConnectionInputError) throw bad(err.message);
      throw err;
    }
  }

  async get(workspace: string): Promise<GitHubConnectionView> {
    const c = await this.repo.get(workspace);
    if (!c) throw new SopError(404, 'not_found', `workspace ${workspace} has no GitHub connection`);
    return view(c);
  }

  async delete(workspace: string): Promise<{ deleted: true }> {
    if (!(await this.repo.delete(workspace))) throw new SopError(404, 'not_found', `workspace ${workspace} has no GitHub connection`);
    return { deleted: true };
  }

  /** The workspace's code host (and its REST API), repository, base branch and folder; null without a connection. */
  async codeHost(workspace: string): Promise<{ host: CodeHost; apiUrl: string; repo: RepoRef; branch: string; folder: string } | null> {
    const c = await this.repo.withToken(workspace);
    if (!c) return null;
    // A connection stored before the setting narrowed: its token is not sent there either.
    const refused = apiUrlRefusal(c.api_url, this.apiUrls);
    if (refused) throw new SopError(409, 'github_api_refused', `workspace ${workspace}'s GitHub connection: ${refused}; PUT the connection again`);
    return { host: this.hostFor(c), apiUrl: c.api_url, repo: { owner: c.owner, repo: c.repo }, branch: c.branch, folder: c.folder };
  }
}

/** NEATROOTS_GITHUB_API_URLS as the connections take it: see the constructor. */
export type GitHubApiUrls = 'any' | 'public' | readonly string[];

/** Addresses a connection's API may not be on unless NEATROOTS_GITHUB_API_URLS names it. */
const INTERNAL = new BlockList();
for (const [net, bits] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.168.0.0', 16]] as const) INTERNAL.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10]] as const) INTERNAL.addSubnet(net, bits, 'ipv6');

/**
 * Why a connection may not use this REST API, or null. The token goes with every call to it, and
 * the review service makes those calls from inside the deployment: a workspace's key must not be
 * able to point them at the deployment's own network (its admin ports, a cloud metadata address).
 */
export function apiUrlRefusal(apiUrl: string, allowed: GitHubApiUrls): string | null {
  if (allowed === 'any' || apiUrl === GITHUB_API_DEFAULT) return null;
  if (allowed !== 'public') {
    if (allowed.some((a) => a.replace(/\/+$/, '') === apiUrl)) return null;
    return `api_url ${apiUrl} is not one this deployment allows (NEATROOTS_GITHUB_API_URLS: ${[GITHUB_API_DEFAULT, ...allowed].join(', ')})`;
  }
  const u = new URL(apiUrl);
  if (u.protocol !== 'https:') return `api_url must be https (got ${apiUrl}); an http API is allowed only when NEATROOTS_GITHUB_API_URLS names it`;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const family = isIP(host);
  const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host)?.[1] ?? v4FromMapped(host) : undefined;
  const internal =
    host === 'localhost' || host.endsWith('.localhost') ||
    (family === 4 && INTERNAL.check(host, 'ipv4')) ||
    (family === 6 && (mapped ? INTERNAL.check(mapped, 'ipv4') : INTERNAL.check(host, 'ipv6')));
  if (internal) return `api_url ${apiUrl} is a loopback, private or link-local address; allowed only when NEATROOTS_GITHUB_API_URLS names it`;
  return null;
}

/** `::ffff:7f00:1` (how URL writes an IPv4-mapped address) as `127.0.0.1`. */
function v4FromMapped(host: string): string | undefined {
  const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (!m) return undefined;
  const hi = parseInt(m[1], 16);
  const lo = parseInt(m[2], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

function view(c: RepoConnection): GitHubConnectionView {
  return {
    repository: `${c.owner}/${c.repo}`,
    branch: c.branch,
    path: c.folder,
    api_url: c.api_url,
    has_token: c.has_token,
    token_hint: c.token_hint,
    updated_at: c.updated_at,
  };
}

function parseBody(body: unknown): RepoConnectionInput {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw bad('the body must be {"repository": "owner/repo", "branch": "main", "path": "procedures", "token": "...", "api_url": "..."}');
  }
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !FIELDS.includes(k));
  if (unknown.length) throw bad(`unknown field ${unknown.join(', ')} in the body; it takes ${FIELDS.join(', ')}`);
  for (const k of FIELDS) if (b[k] !== undefined && typeof b[k] !== 'string') throw bad(`${k} must be text`);
  const s = b as Partial<Record<string, string>>;

  const m = REPOSITORY.exec(s.repository ?? '');
  if (!m) throw bad(`repository must be "owner/repo", got ${JSON.stringify(s.repository ?? null)}`);
  const branch = s.branch ?? 'main';
  if (!branch || branch.length > 255 || /\s|\.\.|^\/|\/$|[~^:?*[\\]/.test(branch)) throw bad(`branch ${JSON.stringify(branch)} is not a valid branch name`);
  const folder = (s.path ?? 'procedures').replace(/\/+$/, '');
  if (folder.startsWith('/') || folder.split('/').some((seg) => seg === '..' || seg === '.') || folder.length > 500) {
    throw bad(`path ${JSON.stringify(s.path)} must be a folder inside the repository (relative, no "..")`);
  }
  const apiUrl = (s.api_url ?? GITHUB_API_DEFAULT).replace(/\/+$/, '');
  let u: URL | null = null;
  try {
    u = new URL(apiUrl);
  } catch {
    u = null;
  }
  if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:')) throw bad(`api_url must be an http(s) URL, e.g. https://github.example.com/api/v3; got ${JSON.stringify(s.api_url)}`);
  if (s.token !== undefined && (s.token.length === 0 || s.token.length > 1000 || /\s/.test(s.token))) throw bad('token must be a GitHub token (no spaces, at most 1000 characters)');
  return { owner: m[1], repo: m[2], branch, folder, api_url: apiUrl, ...(s.token === undefined ? {} : { token: s.token }) };
}
