import type { ApiKeyGrant } from '@neatroots/store';
import { ServiceTimeoutError, UnavailableError } from './errors';
import { cachedKeys, KEY_GRANT_MS, KEY_UNKNOWN_MS } from './key-cache';

/**
 * The distributed api's key lookups (each a call to the review service), on a clock of the
 * test's: kept 30 s (an unknown key 5 s), one call for lookups at the same moment, and a key
 * granted before keeps its grant while the review service cannot answer.
 */
describe('cachedKeys', () => {
  const SHOP: ApiKeyGrant = { project: 'shop', scope: 'api' };
  let now: number;
  let keys: Map<string, ApiKeyGrant>;
  let away: boolean;
  let asked: string[];
  const lookup = () =>
    cachedKeys(async (key) => {
      asked.push(key);
      if (away) throw new UnavailableError('the review service cannot answer right now (UNAVAILABLE: No connection established); retry shortly');
      return keys.get(key) ?? null;
    }, () => now);

  beforeEach(() => {
    now = 1_000_000;
    keys = new Map([['k', SHOP]]);
    away = false;
    asked = [];
  });

  it('keeps a grant 30 s: a revoked key is refused once that has passed', async () => {
    const resolve = lookup();
    expect(await resolve('k')).toEqual(SHOP);
    keys.delete('k');
    now += KEY_GRANT_MS - 1;
    expect(await resolve('k')).toEqual(SHOP);
    now += 1;
    expect(await resolve('k')).toBeNull();
    expect(asked).toEqual(['k', 'k']);
  });

  it('keeps an unknown key 5 s: a key added is taken once that has passed', async () => {
    const resolve = lookup();
    expect(await resolve('new')).toBeNull();
    keys.set('new', SHOP);
    now += KEY_UNKNOWN_MS - 1;
    expect(await resolve('new')).toBeNull();
    now += 1;
    expect(await resolve('new')).toEqual(SHOP);
  });

  it('asks once for lookups of one key at the same moment', async () => {
    const resolve = lookup();
    expect(await Promise.all([resolve('k'), resolve('k'), resolve('k')])).toEqual([SHOP, SHOP, SHOP]);
    expect(asked).toEqual(['k']);
  });

  it('while the review service cannot answer: a key granted before keeps its grant; one never seen, or last found unknown, fails as the call did', async () => {
    const resolve = lookup();
    expect(await resolve('k')).toEqual(SHOP);
    expect(await resolve('gone')).toBeNull();
    away = true;
    now += 10 * KEY_GRANT_MS;
    expect(await resolve('k')).toEqual(SHOP);
    await expect(resolve('never')).rejects.toThrow(/^the review service cannot answer right now/);
    await expect(resolve('gone')).rejects.toThrow(UnavailableError);
    // Back: its answer stands again.
    away = false;
    keys.delete('k');
    expect(await resolve('k')).toBeNull();
  });

  it('while the review service is too slow to answer (its deadline passed): a key granted before keeps its grant; one never seen fails as the call did', async () => {
    let slow = false;
    const timeout = () => new ServiceTimeoutError('review_timeout', 'the review service took more than 10 s for this request (DEADLINE_EXCEEDED: Deadline exceeded); the same request asked again is likely as slow');
    const resolve = cachedKeys(async (key) => {
      if (slow) throw timeout();
      return keys.get(key) ?? null;
    }, () => now);
    expect(await resolve('k')).toEqual(SHOP);
    slow = true;
    now += 10 * KEY_GRANT_MS;
    expect(await resolve('k')).toEqual(SHOP);
    await expect(resolve('never')).rejects.toThrow(ServiceTimeoutError);
    slow = false;
    keys.delete('k');
    expect(await resolve('k')).toBeNull();
  });

  it('a failure that is not the service being away is not covered up', async () => {
    let fail = false;
    const resolve = cachedKeys(async () => {
      if (fail) throw new Error('review service: boom');
      return SHOP;
    }, () => now);
    expect(await resolve('k')).toEqual(SHOP);
    fail = true;
    now += KEY_GRANT_MS;
    await expect(resolve('k')).rejects.toThrow('review service: boom');
  });
});
