import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Db, LogFields, Logger } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import { ProjectsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from '../api';

/**
 * A fault of neatroots in an MCP tool (not the caller's mistake) is answered as a tool error
 * saying it was logged, and it is: through the api's logger, with the fault and the project.
 * The fault is real: the store's findings table is gone, so list_findings fails in the store.
 */
const KEY = 'mcp-log-key';

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

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('shop', KEY);
  app = await createApi({
    queries: createReviewQueries(db),
    resolveKey: (key) => projects.resolveApiKey(key),
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
