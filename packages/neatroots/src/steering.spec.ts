import { steeringLookup } from './runtime';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('steeringLookup: whether halts act in a project', () => {
  it('holds a switch made since the last look at the next look, however long ago the last look was', async () => {
    // The clock is the test's: "within the ttl" and "past it" are what it says, however loaded the machine.
    jest.useFakeTimers();
    try {
      let on = false;
      const lookup = steeringLookup({ projects: () => [], database: async () => on, ttlMs: 5_000 });
      expect(await lookup('shop')).toBe(false);
      jest.advanceTimersByTime(60_000); // idle a while: the cached answer is old
      on = true; // neatroots init --steering, or the app
      expect(await lookup('shop')).toBe(true); // the first run after the switch halts
      on = false;
      jest.advanceTimersByTime(4_999);
      expect(await lookup('shop')).toBe(true); // within the ttl: the cached answer
      jest.advanceTimersByTime(1);
      expect(await lookup('shop')).toBe(false);
    } finally {
      jest.useRealTimers();
    }
  });

  it('waits for a slow database at most waitMs: the last answer stands, and the fresh one serves the next look', async () => {
    // The database answers when the test says: each ask waits here until then.
    const asks: ((on: boolean) => void)[] = [];
    const lookup = steeringLookup({ projects: () => [], database: () => new Promise<boolean>((answer) => asks.push(answer)), ttlMs: 20, waitMs: 30 });
    const first = lookup('shop');
    expect(asks).toHaveLength(1);
    asks[0](false);
    expect(await first).toBe(false);
    await sleep(30); // past the ttl
    // The database is busy: the look returns the last answer while it has not answered.
    expect(await lookup('shop')).toBe(false);
    expect(asks).toHaveLength(2);
    asks[1](true); // its answer, once it comes, serves the next look
    expect(await lookup('shop')).toBe(true);
  });

  it('keeps the last answer when asking fails, and asks again at the next look', async () => {
    let fail = false;
    let asked = 0;
    const lookup = steeringLookup({
      projects: () => [],
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

  it('is on for a project the registry names, without asking the database', async () => {
    let asked = 0;
    const lookup = steeringLookup({ projects: () => [{ name: 'registered', path: '/x', steering: true }], database: async () => (asked++, false) });
    expect(await lookup('registered')).toBe(true);
    expect(asked).toBe(0);
    // Anything else is as the database says (NEATROOTS_STEERING as review seeded it).
    expect(await lookup('other')).toBe(false);
    expect(asked).toBe(1);
  });
});
