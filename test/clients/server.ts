import * as fs from 'node:fs';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from 'neatroots';
import { testConfig, tempHome, REFUND_HALT_CHECK } from '../../packages/neatroots/src/test-app.test';

/**
 * A running neatroots for the clients' own tests (Python, Go): the embedded deployment on free
 * loopback ports, steering on, with a halt rule of the user's own (a refund needs a lookup
 * first) beside the shipped library (which notes a repeated tool call).
 */
export const KEY = 'clients-key';
export const PROJECT = 'shop';
export const repoRoot = path.resolve(__dirname, '../..');

export interface Server {
  app: EmbeddedApp;
  /** host:port of the neatroots.v1 API. */
  address: string;
  close(): Promise<void>;
}

/** `env`: more settings, e.g. NEATROOTS_MAX_MESSAGE_BYTES for a server taking smaller messages. */
export async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const home = tempHome('neatroots-clients', { 'refunds.yaml': REFUND_HALT_CHECK });
  const config = testConfig(home, {
    NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`,
    NEATROOTS_STEERING: PROJECT,
    ...env,
  });
  const app = await startEmbedded({ config, inMemoryDb: true, log: createLogger({ level: 'error' }) });
  return {
    app,
    address: `127.0.0.1:${app.ingest.grpcPort}`,
    async close() {
      await app.close();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}
