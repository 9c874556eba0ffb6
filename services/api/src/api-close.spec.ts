import * as http from 'node:http';
import type { INestApplication } from '@nestjs/common';
import type { ReviewQueries } from '@neatroots/store';
import { createApi } from './api';

/**
 * A stop under REST load: clients on keep-alive connections that send again as soon as they are
 * answered (real HTTP, node's keep-alive agent). Once closing, each answer closes its connection,
 * so the stop waits only for the requests in hand. node's server.close() (Nest's app.close())
 * used to go on answering them on their connections for as long as they sent: the stop never
 * ended, and the process was killed.
 */
describe('the api: a stop under keep-alive load', () => {
  let app: INestApplication | undefined;
  afterAll(async () => {
    await app?.close();
  });

  it('ends well within its grace: the request in hand is answered with Connection: close, and so is every request sent after', async () => {
    // Each request carries its own key (key-shop-<n>), so the test knows which one the api held
    // when the stop began: armed under load, the next key lookup names the request in hand, and
    // it is held until the stop has begun.
    let armed = false;
    let inHandSeq = -1;
    let inHand!: () => void;
    const requestInHand = new Promise<void>((r) => (inHand = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const queries = { listRuns: async () => ({ items: [], next_cursor: null }) } as unknown as ReviewQueries;
    app = await createApi({
      queries,
      // The key looked up in 20 ms (as in a database): at any moment nearly every connection has
      // a request in hand, as under real load.
      resolveKey: async (k) => {
        const n = Number(k.slice('key-shop-'.length));
        if (armed && inHandSeq < 0) {
          inHandSeq = n;
          inHand();
        }
        if (n === inHandSeq) await released;
        await new Promise((r) => setTimeout(r, 20));
        return { project: 'shop', scope: 'api' };
      },
      port: 0,
      host: '127.0.0.1',
      logger: false,
      appDir: null,
      shutdownGraceMs: 5_000,
    });
    const port = (app.getHttpServer() as http.Server).address() as { port: number };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    let stopping = false;
    let seq = 0;
    /** Each answer, with whether its request was sent once the stop had begun. */
    const answers: { seq: number; status: number; connection?: string; sentAfterStop: boolean }[] = [];
    let loaded!: () => void;
    const underLoad = new Promise<void>((r) => (loaded = r));
    let connectionErrors = 0;
    let giveUp = false;
    /** One client: sends again as soon as it is answered, until it cannot connect. */
    const client = async () => {
      while (!giveUp) {
        const n = seq++;
        const sentAfterStop = stopping;
        const ok = await new Promise<boolean>((resolve) => {
          const req = http.get({ host: '127.0.0.1', port: port.port, path: '/v1/projects/shop/runs', agent, headers: { 'x-api-key': `key-shop-${n}` } }, (res) => {
            res.resume();
            res.on('end', () => {
              answers.push({ seq: n, status: res.statusCode!, connection: res.headers.connection, sentAfterStop });
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
    const clients = Array.from({ length: 8 }, client);
    await underLoad;
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(40);

    armed = true;
    await requestInHand;
    stopping = true;
    const t0 = Date.now();
    const closed = app.close();
    release();
    // Without the fix the stop never ends while the clients send: they are stopped after 15 s,
    // so that the test says so instead of timing out.
    let hung!: NodeJS.Timeout;
    const outcome = await Promise.race([closed.then(() => 'closed'), new Promise<string>((r) => (hung = setTimeout(() => r('still closing after 15 s'), 15_000)))]);
    clearTimeout(hung);
    const took = Date.now() - t0;
    giveUp = true;
    await closed;
    await Promise.all(clients);
    agent.destroy();
    app = undefined;

    // The request in hand when the stop began was answered (calls in progress finish), on its
    // connection's last answer; the stop did not wait for the 5 s cut.
    const held = answers.find((a) => a.seq === inHandSeq);
    expect({ outcome, took: took < 5_000 ? 'within the grace' : `${took} ms`, held: held && { status: held.status, connection: held.connection } }).toEqual({
      outcome: 'closed',
      took: 'within the grace',
      held: { status: 200, connection: 'close' },
    });
    // Every request sent once closing was answered on its connection's last answer.
    expect(answers.filter((a) => a.sentAfterStop && a.connection !== 'close')).toEqual([]);
    expect(connectionErrors).toBeGreaterThan(0); // the clients' next try found the port closed
  }, 60_000);
});
