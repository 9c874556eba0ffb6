import { Transform } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { ErrorCode, JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Where the api serves the MCP tools (streamable HTTP). */
export const MCP_PATH = '/v1/mcp';

/** How long, once the agent closed standard input, the answers to its last requests are awaited. */
export const DRAIN_MS = 30_000;

/**
 * `neatroots mcp`: the MCP tools over stdio, for coding agents that start their servers as
 * commands. It relays each JSON-RPC message between the agent's stdio and the api's
 * streamable HTTP endpoint (the SDK's two transports, back to back), so the tools, their
 * checks and the project scoping are the api's own, written once. Resolves when the api's side
 * closes, or once the agent closed standard input and every request it sent is answered
 * (at most `drainMs`, default DRAIN_MS, later: what is still unanswered then is answered with
 * an error); nothing is written to stdout but MCP messages.
 */
export async function relayStdioToHttp(opts: {
  url: string;
  key: string;
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
  onError?: (err: Error) => void;
  drainMs?: number;
}): Promise<void> {
  const where = `${opts.url.replace(/\/+$/, '')}${MCP_PATH}`;
  const input = opts.stdin ?? process.stdin;
  const output = opts.stdout ?? process.stdout;
  const drainMs = opts.drainMs ?? DRAIN_MS;
  // A line that is no JSON-RPC message is answered here with a JSON-RPC error, as the api
  // answers such a body, and said in one line; the rest goes on to the SDK's transport.
  const lines = messageLines((answer, problem) => {
    if (answer) output.write(`${JSON.stringify(answer)}\n`);
    opts.onError?.(new Error(problem));
  });
  input.pipe(lines);
  const stdio = new StdioServerTransport(lines, opts.stdout as never);
  const http = new StreamableHTTPClientTransport(new URL(where), {
    requestInit: { headers: { 'x-api-key': opts.key } },
  });
  // fetch says only "fetch failed": say where, and why when the cause knows. A 404 is a URL
  // that names no MCP endpoint (another path, a server of something else): say what it wants.
  const explain = (err: Error): Error => {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (err.message === 'fetch failed') return new Error(`cannot reach neatroots at ${where} (${cause?.code ?? cause?.message ?? 'no answer'}): is the server running, and --url right?`);
    if ((err as { code?: unknown }).code === 404) return new Error(`${where} answered 404, no MCP endpoint there: --url (NEATROOTS_URL) is the neatroots server's address, as http://127.0.0.1:8080, to which ${MCP_PATH} is added`);
    return err;
  };
  let done = false;
  // Each error is said once: the SDK's HTTP transport calls onerror with an error of send's and
  // then rejects send with the same error, and both are listened to.
  const reported = new WeakSet<Error>();
  // Once closed, what the close itself aborted (the posts still open) is not a problem to say.
  const report = (err: Error) => {
    if (done || reported.has(err)) return;
    reported.add(err);
    opts.onError?.(explain(err));
  };
  const failure = (id: RequestId, message: string): JSONRPCMessage => ({ jsonrpc: '2.0', id, error: { code: -32603, message: `neatroots: ${message}` } });
  await new Promise<void>((resolve) => {
    let ended = false;
    let bound: NodeJS.Timeout | undefined;
    // The agent's requests posted to the api and not answered yet (by id), and its messages
    // still being posted: once standard input ends, the relay waits for these.
    const unanswered = new Map<RequestId, number>();
    let posting = 0;
    const answered = (id: RequestId) => {
      const n = (unanswered.get(id) ?? 0) - 1;
      if (n > 0) unanswered.set(id, n);
      else unanswered.delete(id);
    };
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(bound);
      // Standard input is read no further (a flowing stdin would keep the process up).
      input.unpipe(lines);
      if (!input.listenerCount('data')) input.pause();
      void stdio.close().catch(() => undefined);
      void http.close().catch(() => undefined);
      resolve();
    };
    const settled = () => {
      if (ended && !posting && !unanswered.size) finish();
    };
    // What is posted after an initialize waits for its answer: the session id the api answers
    // it with (which scopes the agent's cancellations) is then sent on each of them.
    let initializing: Promise<unknown> = Promise.resolve();
    // The agent's messages, each posted to the api.
    stdio.onmessage = (msg) => {
      const id = requestId(msg);
      if (id !== undefined) unanswered.set(id, (unanswered.get(id) ?? 0) + 1);
      posting++;
      const sent = initializing.then(() => http.send(msg));
      if ((msg as { method?: unknown }).method === 'initialize') initializing = sent.catch(() => undefined);
      sent
        .catch(async (e: Error) => {
          if (done) return;
          report(e);
          // A request that could not reach the api is answered, so the agent is not left waiting.
          if (id !== undefined) {
            answered(id);
            await stdio.send(failure(id, explain(e).message)).catch(() => undefined);
          }
        })
        .finally(() => {
          posting--;
          settled();
        });
    };
    // The api's messages (its answers, its notifications), each written to the agent.
    http.onmessage = (msg) => {
      const id = answerId(msg);
      stdio
        .send(msg)
        .catch((e: Error) => {
          report(e);
          // A request of the api's that could not reach the agent is answered likewise.
          const asked = requestId(msg);
          if (asked !== undefined && !done) void http.send(failure(asked, e.message)).catch(() => undefined);
        })
        .finally(() => {
          if (id !== undefined) answered(id);
          settled();
        });
    };
    stdio.onerror = report;
    http.onerror = report;
    // Standard input's own failures (the SDK's transport reads the lines taken from it).
    input.on('error', report);
    stdio.onclose = finish;
    http.onclose = finish;
    // stdin ended: the agent sends nothing more, but may still read the answers to what it sent.
    input.once('end', () => {
      ended = true;
      settled();
      if (done) return;
      bound = setTimeout(() => {
        const ids = [...unanswered.keys()];
        const s = `${drainMs / 1000} s after standard input closed`;
        report(new Error(`${ids.length} request${ids.length === 1 ? '' : 's'} still unanswered ${s}; stopping`));
        void Promise.all(ids.map((id) => stdio.send(failure(id, `no answer from neatroots at ${where} ${s}`)).catch(() => undefined))).finally(finish);
      }, drainMs);
    });
    void Promise.all([http.start(), stdio.start()]).catch((err: Error) => {
      report(err);
      finish();
    });
  });
}

type RequestId = string | number;

/** The id of a request (a message with a method and an id); undefined for anything else. */
function requestId(msg: JSONRPCMessage): RequestId | undefined {
  const m = msg as { id?: RequestId; method?: unknown };
  return m.id !== undefined && m.id !== null && 'method' in m ? m.id : undefined;
}

/** The id of an answer (a result or an error, no method); undefined for anything else. */
function answerId(msg: JSONRPCMessage): RequestId | undefined {
  const m = msg as { id?: RequestId };
  return m.id !== undefined && m.id !== null && !('method' in m) ? m.id : undefined;
}

/**
 * The agent's standard input, line by line, with each line that is not a JSON-RPC message taken
 * out: `refused` is called with its answer (-32700 Parse error for a line that is not JSON,
 * -32600 Invalid Request for one that is not a JSON-RPC message; with the line's id when one can
 * be read, else null; none for something that looks like an answer of the agent's) and what is
 * wrong, in one line. Blank lines are skipped. A line longer than the SDK's transport takes is
 * passed on for it to refuse, as it did before.
 */
function messageLines(refused: (answer: JSONRPCMessage | undefined, problem: string) => void): Transform {
  let pending: Buffer = Buffer.alloc(0);
  let n = 0;
  const check = (line: Buffer): Buffer | undefined => {
    n++;
    const text = line.toString('utf8').replace(/\r$/, '');
    if (!text.trim()) return undefined;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      const why = (err as Error).message;
      refused({ jsonrpc: '2.0', id: null, error: { code: ErrorCode.ParseError, message: `Parse error: not JSON (${why})` } } as unknown as JSONRPCMessage, `line ${n} of standard input is not JSON: ${why}; answered ${ErrorCode.ParseError} Parse error`);
      return undefined;
    }
    if (JSONRPCMessageSchema.safeParse(value).success) return line;
    const m = (value && typeof value === 'object' && !Array.isArray(value) ? value : {}) as Record<string, unknown>;
    const id = typeof m.id === 'string' || typeof m.id === 'number' ? m.id : null;
    const problem = invalidBecause(value);
    // An answer of the agent's (to a request of the server's) is not answered back.
    const answer = !('method' in m) && ('result' in m || 'error' in m);
    refused(
      answer ? undefined : ({ jsonrpc: '2.0', id, error: { code: ErrorCode.InvalidRequest, message: `Invalid Request: ${problem}` } } as unknown as JSONRPCMessage),
      `line ${n} of standard input is not a JSON-RPC message: ${problem}; ${answer ? 'not relayed' : `answered ${ErrorCode.InvalidRequest} Invalid Request`}`,
    );
    return undefined;
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      let at: number;
      while ((at = pending.indexOf(0x0a)) !== -1) {
        const line = pending.subarray(0, at + 1);
        pending = pending.subarray(at + 1);
        const ok = check(line.subarray(0, at));
        if (ok) this.push(line);
      }
      // Past the SDK's bound without a line's end: its transport refuses it, as before.
      if (pending.length > STDIO_DEFAULT_MAX_BUFFER_SIZE) {
        this.push(pending);
        pending = Buffer.alloc(0);
      }
      done();
    },
  });
}

/** What makes a JSON value no JSON-RPC message, in a few words. */
function invalidBecause(value: unknown): string {
  if (Array.isArray(value)) return 'a batch (an array); send one message a line';
  if (!value || typeof value !== 'object') return 'not a JSON object';
  const m = value as Record<string, unknown>;
  if (m.jsonrpc !== '2.0') return `jsonrpc must be "2.0", got ${m.jsonrpc === undefined ? 'none' : JSON.stringify(m.jsonrpc)}`;
  if ('method' in m && typeof m.method !== 'string') return `method must be a string, got ${JSON.stringify(m.method)}`;
  if ('id' in m && typeof m.id !== 'string' && typeof m.id !== 'number') return `id must be a string or a number, got ${JSON.stringify(m.id)}`;
  if ('params' in m && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) return 'params must be an object';
  return 'not a request, notification or response';
}
