import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Db, LogFields, Logger } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import { ProjectsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from '../api';
import { UnavailableError } from '../errors';

/**
 * A fault of neatroots in an MCP tool (not the caller's mistake) is answered as a tool error
 * saying it was logged, and it is: through the api's logger, with the fault and the project.
 * The fault is real: the store's findings table is gone, so list_findings fails in the store.
 */
const KEY = 'mcp-log-key';
const AWAY_KEY = 'mcp-away-key';

interface Line {
  msg: string;
  err?: unknown;
  fields?: LogFields;
}

/** The api's logger, keeping what it is given. */
function capture(lines: Line[], fields: LogFields = {}): Logger {
  return {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: (msg, err, more) => void lines.push({ msg, err, fields: { ...fields, ...more } }),
    child: (more) => capture(lines, { ...fields, ...more }),
  };
}

let db: Db;
let app: INestApplication;
const logged: Line[] = [];
/** The keys looked up (distributed, each a call to the review service). */
const lookedUp: string[] = [];

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('shop', KEY);
  await projects.addApiKey('away', AWAY_KEY);
  const queries = createReviewQueries(db);
  app = await createApi({
    // A project whose review service is away (the distributed review link throws this).
    queries: new Proxy(queries, {
      get: (target, prop, receiver) => {
        const v = Reflect.get(target, prop, receiver);
        if (prop !== 'listFindings' || typeof v !== 'function') return v;
        return (project: string, ...rest: unknown[]) => {
          if (project === 'away') throw new UnavailableError('the review service cannot answer right now (UNAVAILABLE: No connection established); retry shortly');
          return (v as (...a: unknown[]) => unknown).call(target, project, ...rest);
        };
      },
    }),
    resolveKey: (key) => {
      lookedUp.push(key);
      return projects.resolveApiKey(key);
    },
    port: 0,
    logger: false,
    appDir: null,
    log: capture(logged),
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await db?.close();
});

it('an unexpected fault in a tool is logged through the api logger and answered as an MCP tool error', async () => {
  const client = new Client({ name: 'mcp-log-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${apiUrl(app)}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
  try {
    const ok = (await client.callTool({ name: 'list_findings', arguments: {} })) as { isError?: boolean };
    expect(ok.isError).toBeFalsy();
    expect(logged).toEqual([]);

    await db.exec('DROP TABLE findings CASCADE');
    const r = (await client.callTool({ name: 'list_findings', arguments: {} })) as { isError?: boolean; content: { text: string }[] };
    expect(r.isError).toBe(true);
    expect(r.content.map((c) => c.text).join('\n')).toBe('internal error in neatroots (logged)');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ msg: 'mcp tool list_findings failed', fields: { project: 'shop' } });
    expect(String((logged[0].err as Error).message)).toMatch(/findings/);
  } finally {
    await client.close();
  }
});

it('a tool whose answer needs a service that is away says so (as REST answers 503), not that neatroots broke', async () => {
  const client = new Client({ name: 'mcp-away-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${apiUrl(app)}/v1/mcp`), { requestInit: { headers: { 'x-api-key': AWAY_KEY } } }));
  try {
    const before = logged.length;
    const r = (await client.callTool({ name: 'list_findings', arguments: {} })) as { isError?: boolean; content: { text: string }[] };
    expect(r.isError).toBe(true);
    expect(r.content.map((c) => c.text).join('\n')).toBe('the review service cannot answer right now (UNAVAILABLE: No connection established); retry shortly');
    // Not a fault of neatroots: nothing logged as one.
    expect(logged.length).toBe(before);
  } finally {
    await client.close();
  }
});

it("looks a request's key up once (before its body is read), not again in the MCP endpoint", async () => {
  lookedUp.length = 0;
  const res = await fetch(`${apiUrl(app)}/v1/mcp`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
  expect(lookedUp).toEqual([KEY]);
});
