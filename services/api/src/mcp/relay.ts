import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/** Where the api serves the MCP tools (streamable HTTP). */
export const MCP_PATH = '/v1/mcp';

/**
 * `neatroots mcp`: the MCP tools over stdio, for coding agents that start their servers as
 * commands. It relays each JSON-RPC message between the agent's stdio and the api's
 * streamable HTTP endpoint (the SDK's two transports, back to back), so the tools, their
 * checks and the project scoping are the api's own, written once. Resolves when either side
 * closes; nothing is written to stdout but MCP messages.
 */
export async function relayStdioToHttp(opts: {
  url: string;
  key: string;
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
  onError?: (err: Error) => void;
}): Promise<void> {
  const where = `${opts.url.replace(/\/+$/, '')}${MCP_PATH}`;
  const stdio = new StdioServerTransport(opts.stdin as never, opts.stdout as never);
  const http = new StreamableHTTPClientTransport(new URL(where), {
    requestInit: { headers: { 'x-api-key': opts.key } },
  });
  // fetch says only "fetch failed": say where, and why when the cause knows.
  const explain = (err: Error): Error => {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return err.message === 'fetch failed' ? new Error(`cannot reach neatroots at ${where} (${cause?.code ?? cause?.message ?? 'no answer'}): is the server running, and --url right?`) : err;
  };
  const report = (err: Error) => opts.onError?.(explain(err));
  await new Promise<void>((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      void stdio.close().catch(() => undefined);
      void http.close().catch(() => undefined);
      resolve();
    };
    pipe(stdio, http, report, explain);
    pipe(http, stdio, report, explain);
    stdio.onclose = finish;
    http.onclose = finish;
    // stdin ended: the agent is gone.
    (opts.stdin ?? process.stdin).once('end', finish);
    void Promise.all([http.start(), stdio.start()]).catch((err: Error) => {
      report(err);
      finish();
    });
  });
}

function pipe(from: Transport, to: Transport, report: (err: Error) => void, explain: (err: Error) => Error): void {
  from.onmessage = (msg) => {
    to.send(msg).catch((e: Error) => {
      const err = explain(e);
      report(err);
      // A request that could not reach the api is answered, so the agent is not left waiting.
      const id = (msg as { id?: string | number }).id;
      if (id !== undefined && 'method' in msg) {
        void from.send({ jsonrpc: '2.0', id, error: { code: -32603, message: `neatroots: ${err.message}` } });
      }
    });
  };
  from.onerror = report;
}
