import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { MCP_PATH, relayStdioToHttp } from './relay';

/**
 * `neatroots mcp`'s relay between an agent's stdio and the api's MCP endpoint, against a stand-in
 * for the endpoint (stateless, JSON answers, as the api's) that answers each request after a while.
 */
describe('relayStdioToHttp', () => {
  let server: http.Server;
  let url: string;
  /** How long the stand-in takes to answer a request; Infinity: never. */
  let delayMs = 0;
  const posted: { method?: string; id?: unknown; session?: string }[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url !== MCP_PATH) {
        res.writeHead(404, { 'content-type': 'text/html' }).end(`<pre>Cannot ${req.method} ${req.url}</pre>`);
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      if (req.headers['x-api-key'] === 'bad') {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'unauthorized', message: 'unknown API key' } }));
        return;
      }
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const msg = JSON.parse(body) as { method?: string; id?: string | number };
        const session = req.headers['mcp-session-id'];
        posted.push({ method: msg.method, id: msg.id, ...(typeof session === 'string' ? { session } : {}) });
        // initialize is answered with a session id, as the api's endpoint does.
        if (msg.method === 'initialize') res.setHeader('mcp-session-id', `session-${posted.length}`);
        if (msg.id === undefined) {
          res.writeHead(202).end();
          return;
        }
        if (delayMs === Infinity) return; // never answered
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { answered: msg.method } }));
        }, delayMs);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => (posted.length = 0));

  /** Pipes the agent's lines in, closes its standard input, and waits for the relay to end. */
  async function relay(lines: (object | string)[], drainMs?: number, to: { url?: string; key?: string } = {}): Promise<{ answers: { id?: unknown; result?: unknown; error?: { message: string } }[]; errors: string[]; ms: number }> {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    let written = '';
    stdout.on('data', (d: Buffer) => (written += d.toString()));
    const errors: string[] = [];
    const t0 = Date.now();
    const done = relayStdioToHttp({ url: to.url ?? url, key: to.key ?? 'k', stdin, stdout, onError: (e) => errors.push(e.message), ...(drainMs !== undefined ? { drainMs } : {}) });
    for (const l of lines) stdin.write(typeof l === 'string' ? l : `${JSON.stringify(l)}\n`);
    stdin.end();
    await done;
    return { answers: written.split('\n').filter(Boolean).map((l) => JSON.parse(l)), errors, ms: Date.now() - t0 };
  }

  const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
  const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
  const toolsList = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

  it('standard input closed with requests in flight: their answers are awaited and written before it ends', async () => {
    delayMs = 300;
    const r = await relay([initialize, initialized, toolsList]);
    expect(r.errors).toEqual([]);
    expect(r.answers).toEqual([
      { jsonrpc: '2.0', id: 1, result: { answered: 'initialize' } },
      { jsonrpc: '2.0', id: 2, result: { answered: 'tools/list' } },
    ]);
    expect(posted.map((m) => m.method)).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
  });

  it("sends the session id initialize was answered with on every later message (the api scopes the agent's cancellations by it)", async () => {
    delayMs = 0;
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'timed out' } };
    const r = await relay([initialize, initialized, toolsList, cancel]);
    expect(r.errors).toEqual([]);
    expect(posted).toEqual([
      { method: 'initialize', id: 1 },
      { method: 'notifications/initialized', session: 'session-1' },
      { method: 'tools/list', id: 2, session: 'session-1' },
      { method: 'notifications/cancelled', session: 'session-1' },
    ]);
  });

  it('a line that is no JSON-RPC message is answered with a JSON-RPC error and said in one line; the lines around it are relayed', async () => {
    delayMs = 0;
    const r = await relay([
      '{"jsonrpc":"1.0","id":8,"method":"ping"}\n',
      'not json\n',
      '\n',
      '{"jsonrpc":"2.0","id":10,"method":"ping"}\n',
      '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\r\n',
      '[{"jsonrpc":"2.0","id":11,"method":"ping"}]\n',
      '{"jsonrpc":"2.0","id":"x","method":"ping"}\n',
    ]);
    expect(r.answers).toEqual(
      expect.arrayContaining([
        { jsonrpc: '2.0', id: 8, error: { code: -32600, message: 'Invalid Request: jsonrpc must be "2.0", got "1.0"' } },
        { jsonrpc: '2.0', id: null, error: { code: -32700, message: expect.stringMatching(/^Parse error: not JSON \(Unexpected token/) } },
        { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: id must be a string or a number, got {"a":1}' } },
        { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: a batch (an array); send one message a line' } },
        { jsonrpc: '2.0', id: 10, result: { answered: 'ping' } },
        { jsonrpc: '2.0', id: 'x', result: { answered: 'ping' } },
      ]),
    );
    expect(r.answers).toHaveLength(6);
    expect(posted.map((m) => m.id)).toEqual([10, 'x']);
    expect(r.errors).toEqual([
      'line 1 of standard input is not a JSON-RPC message: jsonrpc must be "2.0", got "1.0"; answered -32600 Invalid Request',
      expect.stringMatching(/^line 2 of standard input is not JSON: Unexpected token .*; answered -32700 Parse error$/),
      'line 5 of standard input is not a JSON-RPC message: id must be a string or a number, got {"a":1}; answered -32600 Invalid Request',
      'line 6 of standard input is not a JSON-RPC message: a batch (an array); send one message a line; answered -32600 Invalid Request',
    ]);
    for (const e of r.errors) expect(e).not.toContain('\n');
  });

  it('a message split across writes, or two in one, is relayed whole', async () => {
    delayMs = 0;
    const r = await relay(['{"jsonrpc":"2.0",', '"id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,', '"method":"ping"}\n']);
    expect(r.errors).toEqual([]);
    expect(r.answers).toEqual(expect.arrayContaining([{ jsonrpc: '2.0', id: 1, result: { answered: 'ping' } }, { jsonrpc: '2.0', id: 2, result: { answered: 'ping' } }]));
  });

  it('standard input closed with nothing in flight: it ends at once', async () => {
    delayMs = 0;
    const r = await relay([]);
    expect(r).toMatchObject({ answers: [], errors: [] });
    expect(r.ms).toBeLessThan(1_000);
  });

  it('waits a bounded time: a request still unanswered then is answered with an error, and it ends', async () => {
    delayMs = Infinity;
    const r = await relay([toolsList], 200);
    expect(r.ms).toBeGreaterThanOrEqual(190);
    expect(r.ms).toBeLessThan(5_000);
    expect(r.answers).toEqual([{ jsonrpc: '2.0', id: 2, error: { code: -32603, message: expect.stringMatching(/^neatroots: no answer from neatroots .* 0\.2 s after standard input closed/) } }]);
    expect(r.errors).toEqual([expect.stringMatching(/^1 request still unanswered 0\.2 s after standard input closed/)]);
  });

  // The SDK's transport calls onerror with an error of send's and then rejects send with it: the
  // relay listens to both, and said each such error twice on standard error.
  it('an api it cannot reach: the request is answered with an error, said once on standard error', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const r = await relay([initialize], undefined, { url: `http://127.0.0.1:${port}` });
    expect(r.errors).toEqual([expect.stringMatching(new RegExp(`^cannot reach neatroots at http://127\\.0\\.0\\.1:${port}/v1/mcp \\(ECONNREFUSED\\)`))]);
    expect(r.answers).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32603, message: `neatroots: ${r.errors[0]}` } }]);
  });

  it('a URL with no MCP endpoint (404): the request is answered with an error saying what --url wants', async () => {
    const r = await relay([initialize], undefined, { url: `${url}/v1/mcp` });
    const said = `${url}/v1/mcp/v1/mcp answered 404, no MCP endpoint there: --url (NEATROOTS_URL) is the neatroots server's address, as http://127.0.0.1:8080, to which /v1/mcp is added`;
    expect(r.errors).toEqual([said]);
    expect(r.answers).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32603, message: `neatroots: ${said}` } }]);
  });

  it('a key the api refuses: the request is answered with an error, said once on standard error', async () => {
    const r = await relay([initialize], undefined, { key: 'bad' });
    expect(r.errors).toEqual([expect.stringMatching(/^Streamable HTTP error: Error POSTing to endpoint: .*unknown API key/)]);
    expect(r.answers).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32603, message: `neatroots: ${r.errors[0]}` } }]);
  });
});
