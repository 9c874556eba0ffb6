import type { ApiKeyGrant } from '@neatroots/store';
import { ServiceTimeoutError, UnavailableError } from './errors';
import type { ResolveKey } from './tokens';

/** How long a key's grant is taken without asking again; a revoked key is refused within it. */
export const KEY_GRANT_MS = 30_000;
/** How long a key found unknown is refused without asking again. */
export const KEY_UNKNOWN_MS = 5_000;
/** Keys kept at most: past it the cache starts over. */
const MAX_KEYS = 10_000;

/**
 * The api's key lookups in the distributed deployment, where each is a call to the review
 * service: a key's grant (its project and scope) is kept KEY_GRANT_MS, an unknown key
 * KEY_UNKNOWN_MS, and the lookups of one key at the same moment are one call (a request's body
 * check, its guard and the MCP endpoint each ask).
 *
 * While the review service cannot answer (UnavailableError: away, restarting, refusing this
 * process's calls; ServiceTimeoutError: too slow to answer within the call's deadline, hung or
 * overloaded), a key granted before keeps the grant it had, however old: the requests that
 * need no answer of review's (MCP's initialize and tools/list) are served, and those that do
 * answer 503 or 504 (a tool error over MCP) naming the service. A key never granted cannot be
 * checked then: its lookup fails as the call did (503, 504).
 */
export function cachedKeys(resolve: ResolveKey, now: () => number = Date.now): (key: string) => Promise<ApiKeyGrant | null> {
  const known = new Map<string, { grant: ApiKeyGrant | null; at: number }>();
  const asking = new Map<string, Promise<ApiKeyGrant | null>>();
  return (key) => {
    const hit = known.get(key);
    if (hit && now() - hit.at < (hit.grant ? KEY_GRANT_MS : KEY_UNKNOWN_MS)) return Promise.resolve(hit.grant);
    const pending = asking.get(key);
    if (pending) return pending;
    const lookup = (async () => {
      try {
        const grant = await resolve(key);
        if (known.size >= MAX_KEYS && !known.has(key)) known.clear();
        known.set(key, { grant, at: now() });
        return grant;
      } catch (err) {
        // The review service cannot say now: what it last answered for this key stands until
        // it can, when that was a grant (an unknown key, or one never asked, cannot be checked).
        if ((err instanceof UnavailableError || err instanceof ServiceTimeoutError) && hit?.grant) return hit.grant;
        throw err;
      } finally {
        asking.delete(key);
      }
    })();
    asking.set(key, lookup);
    return lookup;
  };
}
