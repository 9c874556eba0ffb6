import * as http from 'node:http';
import { createMetrics, startAdmin, type AdminServer } from './admin';

/**
 * The admin port's stop while probes and scrapers ask on keep-alive connections, back to back:
 * once closing, each answer closes its connection, so the stop waits only for the requests in
 * hand. node's server.close() alone used to go on answering them on their connections for as
 * long as they asked (/readyz during the stop answers 503, and a probe asks again): the process
 * never ended and was killed.
 */
describe('the admin port: a stop under keep-alive probes', () => {
  let admin: AdminServer | undefined;
  afterAll(async () => {
    await admin?.close();
  });

  it('ends well within its grace: the probe in hand is answered with Connection: close, and so is every request sent after', async () => {
    // Armed under load, the next readiness question is held until the stop has begun, and
    // answered not ready: the one 503, so the test knows which answer it was.
    let armed = false;
    let held = false;
    let inHand!: () => void;
    const probeInHand = new Promise<void>((r) => (inHand = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    admin = await startAdmin({
      host: '127.0.0.1',
      port: 0,
      metrics: createMetrics('t'),
      // Asked in 5 ms (its drivers answer): nearly every connection has a probe in hand.
      ready: async () => {
        if (armed && !held) {
          held = true;
          inHand();
          await released;
          return false;
        }
        await new Promise((r) => setTimeout(r, 5));
        return true;
      },
    });
    const port = admin.port;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 6 });
    let stopping = false;
    /** Each answer, with whether its request was sent once the stop had begun. */
    const answers: { path: string; status: number; connection?: string; sentAfterStop: boolean }[] = [];
    let loaded!: () => void;
    const underLoad = new Promise<void>((r) => (loaded = r));
    let connectionErrors = 0;
    let giveUp = false;
    /** One client: asks again as soon as it is answered, until it cannot connect. */
    const client = async (path: string) => {
      while (!giveUp) {
        const sentAfterStop = stopping;
        const ok = await new Promise<boolean>((resolve) => {
          const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
            res.resume();
            res.on('end', () => {
              answers.push({ path, status: res.statusCode!, connection: res.headers.connection, sentAfterStop });
              if (answers.length === 40) loaded();
              resolve(true);
            });
          });
          req.on('error', () => {
            connectionErrors++;
            resolve(false);
          });
        });
        if (!ok && stopping) return;
      }
    };
    const clients = [...Array.from({ length: 4 }, () => client('/readyz')), client('/metrics'), client('/healthz')];
    await underLoad;
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(40);

    armed = true;
    await probeInHand;
    stopping = true;
    const t0 = Date.now();
    const closed = admin.close(5_000);
    release();
    // Without the fix the stop never ends while the clients ask: they are stopped after 15 s,
    // so that the test says so instead of timing out.
    let hung!: NodeJS.Timeout;
    const outcome = await Promise.race([closed.then(() => 'closed'), new Promise<string>((r) => (hung = setTimeout(() => r('still closing after 15 s'), 15_000)))]);
    clearTimeout(hung);
    const took = Date.now() - t0;
    giveUp = true;
    await closed;
    await Promise.all(clients);
    agent.destroy();
    admin = undefined;

    // The probe in hand when the stop began was answered, on its connection's last answer; the
    // stop did not wait for the 5 s cut.
    const inHandAnswer = answers.find((a) => a.status === 503);
    expect({ outcome, took: took < 5_000 ? 'within the grace' : `${took} ms`, held: inHandAnswer && { path: inHandAnswer.path, connection: inHandAnswer.connection } }).toEqual({
      outcome: 'closed',
      took: 'within the grace',
      held: { path: '/readyz', connection: 'close' },
    });
    // Every request sent once closing was answered on its connection's last answer.
    expect(answers.filter((a) => a.sentAfterStop && a.connection !== 'close')).toEqual([]);
    expect(connectionErrors).toBeGreaterThan(0); // the clients' next try found the port closed
  }, 60_000);
});
