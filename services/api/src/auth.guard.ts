import { HttpStatus, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { ApiKeyGrant } from '@neatroots/store';
import { routedPath } from './body';
import { ApiError } from './errors';
import { RESOLVE_KEY, type ResolveKey } from './tokens';

/** What the guard reads of an express request (@types/express is not installed). */
export interface KeyedRequest {
  headers: Record<string, string | string[] | undefined>;
  params: Record<string, string | undefined>;
  /** The key's project, when keyBeforeBody resolved it already. */
  keyProject?: { key: string; project: string };
}

/** What an ingest key (an agent's) is told by the API and MCP. */
export const INGEST_KEY_REFUSED = 'this key may only send spans (scope ingest); use a full key for the API';

/**
 * The project of a key the API takes: 401 for an unknown key, 403 for one that may only send
 * spans (scope ingest: what agents are given, so an agent cannot dismiss the findings of the
 * checks that watch it, change its checks or procedures).
 */
export function apiProjectOf(grant: ApiKeyGrant | null): string {
  if (!grant) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthorized', 'unknown API key');
  if (grant.scope !== 'api') throw new ApiError(HttpStatus.FORBIDDEN, 'forbidden', INGEST_KEY_REFUSED);
  return grant.project;
}

/**
 * The paths a key opens (the guard's): their bodies are read only for a known key. Matched on
 * the routed path and case-insensitively, as express routes (/v1/Projects/p/checks and /v1/Mcp
 * reach the same endpoints).
 */
const KEYED_PATH = /^\/v1\/(projects|workspaces)\/|^\/v1\/mcp(\/|$)/i;

/**
 * Before a request's body is read (up to 16 MiB, parsed): a request to a path that needs a key
 * and carries a body is refused with 401 at once when it has no key or an unknown one, and 403
 * for an ingest key, as the guard would refuse it after reading the body. The project found is
 * kept for the guard.
 */
export function keyBeforeBody(resolveKey: ResolveKey) {
  return (req: KeyedRequest & { method?: string; path?: string; originalUrl?: string; url?: string }, _res: unknown, next: (err?: unknown) => void): void => {
    const length = req.headers['content-length'];
    const body = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
    if (!body || !KEYED_PATH.test(routedPath(req))) return next();
    const key = apiKeyOf(req);
    if (!key) return next(new ApiError(HttpStatus.UNAUTHORIZED, 'unauthorized', 'an API key is required (x-api-key or Authorization: Bearer)'));
    Promise.resolve(resolveKey(key)).then(
      (grant: ApiKeyGrant | null) => {
        let project: string;
        try {
          project = apiProjectOf(grant);
        } catch (err) {
          return next(err);
        }
        req.keyProject = { key, project };
        next();
      },
      (err: unknown) => next(err),
    );
  };
}

/** The key from `x-api-key` or `Authorization: Bearer <key>`. */
export function apiKeyOf(req: KeyedRequest): string | undefined {
  const header = req.headers['x-api-key'];
  const direct = Array.isArray(header) ? header[0] : header;
  if (direct) return direct.trim() || undefined;
  const auth = req.headers.authorization;
  const m = typeof auth === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1];
}

/**
 * A key opens its own project (and workspace) only: 401 without a valid key, 403 for another,
 * and 403 for a key that may only send spans (scope ingest).
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(@Inject(RESOLVE_KEY) private readonly resolveKey: ResolveKey) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<KeyedRequest>();
    const key = apiKeyOf(req);
    if (!key) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthorized', 'an API key is required (x-api-key or Authorization: Bearer)');
    const project = req.keyProject?.key === key ? req.keyProject.project : apiProjectOf(await this.resolveKey(key));
    // A workspace is the sopops name for a project: one key opens both paths.
    const wanted = req.params.project ?? req.params.ws;
    if (typeof wanted === 'string' && wanted !== project) {
      throw new ApiError(HttpStatus.FORBIDDEN, 'forbidden', `this API key does not open ${req.params.project !== undefined ? 'project' : 'workspace'} ${wanted}`);
    }
    return true;
  }
}
