import { HttpStatus, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { ApiError } from './errors';
import { RESOLVE_KEY, type ResolveKey } from './tokens';

/** What the guard reads of an express request (@types/express is not installed). */
export interface KeyedRequest {
  headers: Record<string, string | string[] | undefined>;
  params: Record<string, string | undefined>;
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

/** A key opens its own project (and workspace) only: 401 without a valid key, 403 for another. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(@Inject(RESOLVE_KEY) private readonly resolveKey: ResolveKey) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<KeyedRequest>();
    const key = apiKeyOf(req);
    if (!key) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthorized', 'an API key is required (x-api-key or Authorization: Bearer)');
    const project = await this.resolveKey(key);
    if (!project) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthorized', 'unknown API key');
    // A workspace is the sopops name for a project: one key opens both paths.
    const wanted = req.params.project ?? req.params.ws;
    if (typeof wanted === 'string' && wanted !== project) {
      throw new ApiError(HttpStatus.FORBIDDEN, 'forbidden', `this API key does not open ${req.params.project !== undefined ? 'project' : 'workspace'} ${wanted}`);
    }
    return true;
  }
}
