import * as fs from 'node:fs';
import { credentials, status as Status, type ClientOptions } from '@grpc/grpc-js';
import { makeTopics } from '@neatroots/messages';
import { createLogger, embeddedPlatform, internalClientOptions, loadModelConfig, type Services } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { grpcRequestBytesOf, REVIEW_GRPC_REQUEST_BYTES, SERVICES, startNeatroots } from './compose';
import { tempHome, testConfig } from './test-app.test';

const MIB = 1024 * 1024;
const TOKEN = 'a-random-secret-for-the-deployment';

/**
 * The gRPC ports read a request whole before its internal token is checked: only review's, to
 * which the api forwards sessions (8 MiB) and heads (16 MiB), takes more than grpc-js's 4 MiB.
 */
describe("the services' gRPC ports: the largest request each takes", () => {
  it("review's: 20 MiB, the api's largest body (a head, 16 MiB) and 4 MiB more; the others' grpc-js's default", () => {
    expect(REVIEW_GRPC_REQUEST_BYTES).toBe(20 * MIB);
    expect(grpcRequestBytesOf(['review'])).toBe(20 * MIB);
    expect(grpcRequestBytesOf(SERVICES)).toBe(20 * MIB);
    for (const s of ['question', 'rule-engine', 'ingest', 'api'] as const) expect({ s, bytes: grpcRequestBytesOf([s]) }).toEqual({ s, bytes: undefined });
    expect(grpcRequestBytesOf(['question', 'rule-engine'])).toBeUndefined();
  });

  describe("a process running review (on the port its composition serves)", () => {
    let home: string;
    let services: Services;
    beforeAll(async () => {
      home = tempHome('neatroots-grpc-bounds-');
      const config = testConfig(home, { NEATROOTS_INTERNAL_TOKEN: TOKEN });
      const log = createLogger({ level: 'silent' });
      services = await startNeatroots({ platform: embeddedPlatform({ config, log, inMemoryDb: true, drainTopic: makeTopics(config.NEATROOTS_TOPIC_PREFIX).events.name }), services: SERVICES, config, models: loadModelConfig({}), log, watch: false, grpcPort: 0 });
    }, 60_000);
    afterAll(async () => {
      await services?.close();
      fs.rmSync(home, { recursive: true, force: true });
    });

    const receive = (bytes: number, options: ClientOptions) => {
      const client = new v1.SopClient(`127.0.0.1:${services.servicePort!}`, credentials.createInsecure(), options);
      return new Promise<string>((resolve) =>
        client.receiveSession({ workspace: 'nowhere', session_json: 'x'.repeat(bytes) }, (err) => {
          client.close();
          resolve(err ? `${Status[err.code]}: ${err.details}` : 'OK');
        }),
      );
    };

    it('refuses a request over 20 MiB without the token as too large, and reads one just under it with the token', async () => {
      expect(await receive(REVIEW_GRPC_REQUEST_BYTES + 1024, {})).toMatch(/^RESOURCE_EXHAUSTED: .*larger than max/i);
      // Read whole and past the token: the handler's own answer (not JSON), not the size's.
      const under = await receive(REVIEW_GRPC_REQUEST_BYTES - 1024, internalClientOptions(TOKEN));
      expect(under).not.toMatch(/^(RESOURCE_EXHAUSTED|UNAUTHENTICATED)/);
      expect(await receive(REVIEW_GRPC_REQUEST_BYTES - 1024, {})).toMatch(/^UNAUTHENTICATED: .*no internal token/);
    }, 60_000);
  });
});
