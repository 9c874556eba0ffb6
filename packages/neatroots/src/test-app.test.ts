import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig, type Config } from '@neatroots/platform';

/**
 * What every test that boots the app inside a jest worker shares: a fresh data folder, and a
 * config with every port chosen by the OS and ingest's memory ceiling off (the ceiling reads
 * the worker's RSS, which every app the worker ran shares; the flood tests test the ceiling).
 */
export function testConfig(home: string, env: Record<string, string> = {}): Config {
  return loadConfig(testEnv(home, env));
}

/** The environment of a test's neatroots in `home`: every port chosen by the system, no memory ceiling. */
export function testEnv(home: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    NEATROOTS_HOME: home,
    NEATROOTS_OTLP_PORT: '0',
    NEATROOTS_OTLP_HTTP_PORT: '0',
    NEATROOTS_GRPC_PORT: '0',
    NEATROOTS_HTTP_PORT: '0',
    NEATROOTS_ADMIN_PORT: '0',
    NEATROOTS_MEMORY_CEILING_MB: '0',
    ...env,
  };
}

/** A new data folder under the system's temporary one, with these files under checks/. */
export function tempHome(prefix: string, checks: Record<string, string> = {}): string {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  if (Object.keys(checks).length) fs.mkdirSync(path.join(home, 'checks'));
  for (const [name, text] of Object.entries(checks)) fs.writeFileSync(path.join(home, 'checks', name), text);
  return home;
}

/** The halt rule the end-to-end and client tests steer by: no refund before an order lookup. */
export const REFUND_HALT_CHECK = `id: refund-without-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: issue_refund }
  requires: { tool: lookup_order }
guidance: Stop. Call {requires} before {tool}.
action: halt
`;

/** A check a person might save: no refund before the order is looked up (flags). */
export const REFUND_LOOKUP_RULE = `# refunds need the order looked up first
id: refund-needs-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
guidance: Look the order up before refunding it.
`;

/** Calls a running app's HTTP API with a key, a JSON body when given, and reads the JSON answer. */
export function jsonApi(base: () => string, defaultKey: string) {
  return async <T = Record<string, unknown>>(method: string, p: string, body?: unknown, key = defaultKey): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${base()}${p}`, {
      method,
      headers: { 'x-api-key': key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as T };
  };
}
