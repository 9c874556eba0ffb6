import { steeringLookup } from './runtime';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('steeringLookup: whether halts act in a project', () => {
  it('holds a switch made since the last look at the next look, however long ago the last look was', async () => {
    let on = false;
    const lookup = steeringLookup({ projects: () => [], env: [], database: async () => on, ttlMs: 50 });
    expect(await lookup('shop')).toBe(false);
    await sleep(120); // idle a while: the cached answer is old
    on = true; // neatroots init --steering, or the app
    expect(await lookup('shop')).toBe(true); // the first run after the switch halts
    on = false;
    expect(await lookup('shop')).toBe(true); // within the ttl: the cached answer
    await sleep(60);
    expect(await lookup('shop')).toBe(false);
  });

  it('waits for a slow database at most waitMs: the last answer stands, and the fresh one serves the next look', async () => {
    let on = false;
    let delay = 0;
    const lookup = steeringLookup({ projects: () => [], env: [], database: async () => (await sleep(delay), on), ttlMs: 20, waitMs: 30 });
    expect(await lookup('shop')).toBe(false);
    await sleep(30);
    on = true;
    delay = 150;
    const t0 = Date.now();
    expect(await lookup('shop')).toBe(false); // the database is busy: not held up for it
    expect(Date.now() - t0).toBeLessThan(120);
    await sleep(200);
    expect(await lookup('shop')).toBe(true);
  });

  it('keeps the last answer when asking fails, and asks again at the next look', async () => {
    let fail = false;
    let asked = 0;
    const lookup = steeringLookup({
      projects: () => [],
      env: [],
      database: async () => {
        asked++;
        if (fail) throw new Error('review unreachable');
        return true;
      },
      ttlMs: 10,
    });
    expect(await lookup('shop')).toBe(true);
    fail = true;
    await sleep(20);
    expect(await lookup('shop')).toBe(true);
    await sleep(20);
    expect(await lookup('shop')).toBe(true);
    expect(asked).toBe(3);
  });

  it('is on for a project the environment or the registry names, without asking the database', async () => {
    let asked = 0;
    const lookup = steeringLookup({ projects: () => [{ name: 'registered', path: '/x', steering: true }], env: ['from-env'], database: async () => (asked++, false) });
    expect(await lookup('from-env')).toBe(true);
    expect(await lookup('registered')).toBe(true);
    expect(asked).toBe(0);
  });
});
