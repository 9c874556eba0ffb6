import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, loadConfig } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from 'neatroots';

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

export async function startServer(): Promise<Server> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-clients-'));
  fs.mkdirSync(path.join(home, 'checks'));
  fs.writeFileSync(
    path.join(home, 'checks', 'refunds.yaml'),
    `id: refund-without-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: issue_refund }
  requires: { tool: lookup_order }
guidance: Stop. Call {requires} before {tool}.
action: halt
`,
  );
  const config = loadConfig({
    NEATROOTS_HOME: home,
    NEATROOTS_OTLP_PORT: '0',
    NEATROOTS_OTLP_HTTP_PORT: '0',
    NEATROOTS_GRPC_PORT: '0',
    NEATROOTS_HTTP_PORT: '0',
    // A jest worker holds several apps: the memory ceiling (this process's RSS) is the flood test's.
    NEATROOTS_MEMORY_CEILING_MB: '0',
    NEATROOTS_ADMIN_PORT: '0',
    NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`,
    NEATROOTS_STEERING: PROJECT,
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
