import * as http from 'node:http';
import { MemoryBus } from '@neatroots/platform';
import { startIngest, type IngestHandle } from './ingest';

/**
 * A stop under OTLP/HTTP load: clients on keep-alive connections that send again as soon as
 * they are answered (real HTTP, node's keep-alive agent). Once closing, each answer closes its
 * connection, so the stop waits only for the requests in flight; it used to answer 503 on the
 * same connections until the 5 s cut (shutdownGraceMs).
 */
describe('OTLP/HTTP: a stop under load', () => {
  let bus: MemoryBus;
  let ingest: IngestHandle;
  afterAll(async () => {
    await ingest?.close();
    await bus?.close();
  });

  it('ends well within the 5 s cut: the exports in hand are answered with Connection: close, and the connections end', async () => {
    bus = new MemoryBus();
    ingest = await startIngest({
      bus,
      // The key looked up in 20 ms (as in a database): at any moment nearly every connection has
      // an export in hand, as under real load.
      resolveKey: async (k) => {
        await new Promise((r) => setTimeout(r, 20));
        return k === 'key-shop' ? 'shop' : undefined;
      },
      otlpPort: 0,
      grpcPort: 0,
      otlpHttpPort: 0,
      shutdownGraceMs: 5_000,
      logger: { warn: () => undefined, error: () => undefined },
    });
    const port = ingest.otlpHttpPort!;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const body = JSON.stringify({
      resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', name: 'execute_tool lookup', kind: 1, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000001000000' }] }] }],
    });
    let stopping = false;
    const answers: { status: number; connection?: string; afterStop: boolean }[] = [];
    let connectionErrors = 0;
    /** One client: sends again as soon as it is answered, until it cannot connect. */
    const client = async () => {
      for (;;) {
        const ok = await new Promise<boolean>((resolve) => {
          const req = http.request({ host: '127.0.0.1', port, path: '/v1/traces', method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': 'key-shop' } }, (res) => {
            res.resume();
            res.on('end', () => {
              answers.push({ status: res.statusCode!, connection: res.headers.connection, afterStop: stopping });
              resolve(true);
            });
          });
          req.on('error', () => {
            connectionErrors++;
            resolve(false);
          });
          req.end(body);
        });
        if (!ok && stopping) return;
      }
    };
    const clients = Array.from({ length: 8 }, client);
    await new Promise((r) => setTimeout(r, 500)); // under load
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(20);

    stopping = true;
    const t0 = Date.now();
    await ingest.close();
    const took = Date.now() - t0;
    await Promise.all(clients);
    agent.destroy();

    const after = answers.filter((a) => a.afterStop);
    expect({ took: took < 2_000 ? 'under 2 s' : `${took} ms`, answeredAfterStop: after.length > 0 }).toEqual({ took: 'under 2 s', answeredAfterStop: true });
    // The exports in hand when the stop began were answered (200: calls in progress finish), and
    // every answer once closing closed its connection: no client is kept answered 503 on it.
    expect(after.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    expect(after.filter((a) => a.connection !== 'close')).toEqual([]);
    expect(connectionErrors).toBeGreaterThan(0); // the clients' next try found the port closed
  }, 30_000);
});
