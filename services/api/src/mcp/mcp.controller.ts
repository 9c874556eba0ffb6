import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { All, Controller, Inject, Logger as NestLogger, Post, Req, Res, UseGuards } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '@neatroots/ports';
import type { ReviewQueries } from '@neatroots/store';
import { apiKeyOf, ApiKeyGuard, apiProjectOf, type KeyedRequest } from '../auth.guard';
import type { Authoring } from '../authoring';
import { givenUp } from '../checks.controller';
import { MCP_PREVIEW_MS } from '../limits';
import { API_LOG, AUTHORING, RESOLVE_KEY, REVIEW_QUERIES, type ResolveKey } from '../tokens';
import { MCP_PATH } from './relay';
import { createMcpServer } from './tools';

/**
 * The MCP tools over streamable HTTP, at POST /v1/mcp: the API key (x-api-key or
 * Authorization: Bearer) opens one project and every tool acts in it. Stateless: each request
 * gets a server and a transport of its own (the SDK's stateless mode), so any api replica
 * answers any request and nothing is kept between them; answers are JSON, not streams.
 *
 * `initialize` is answered with a random `mcp-session-id`, which MCP clients send on every
 * later request (the stdio relay's too). Nothing is kept under it: it only tells one client's
 * calls from another's when a call is cancelled.
 */

type McpRequest = IncomingMessage & KeyedRequest & { body?: unknown };

const VERSION = '0.1.0';

type Message = { method?: unknown; id?: unknown; params?: { requestId?: unknown } };

/** The header a client's session id comes in, and what `initialize` answers. */
const SESSION_HEADER = 'mcp-session-id';

/** The session id a request carries (as the server gave it at initialize), if any. */
function sessionOf(req: McpRequest): string | undefined {
  const h = req.headers[SESSION_HEADER];
  const v = Array.isArray(h) ? h[0] : h;
  return v && v.length <= 256 ? v : undefined;
}

/** The one JSON-RPC message of a POST (a batch, or anything else: undefined). */
function messageOf(body: unknown): Message | undefined {
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Message) : undefined;
}

/**
 * The authoring side as one request's tools call it: a preview stops when the call is given up
 * (`signal`), and answers within MCP_PREVIEW_MS with what it covered, before the MCP clients'
 * 60 s timeout.
 */
function forCall(a: Authoring, signal: AbortSignal): Authoring {
  return {
    list: a.list.bind(a),
    get: a.get.bind(a),
    draft: a.draft.bind(a),
    validate: a.validate.bind(a),
    save: a.save.bind(a),
    remove: a.remove.bind(a),
    halt: a.halt.bind(a),
    preview: (project, sub, opts) => a.preview(project, sub, { ...opts, signal, time_ms: opts.time_ms ?? MCP_PREVIEW_MS }),
  };
}

@Controller()
@UseGuards(ApiKeyGuard)
export class McpController {
  constructor(
    @Inject(AUTHORING) private readonly authoring: Authoring | null,
    @Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries,
    @Inject(RESOLVE_KEY) private readonly resolveKey: ResolveKey,
    @Inject(API_LOG) private readonly log: Logger | null,
  ) {}

  /**
   * The tool calls in flight in this process, by project, session id and JSON-RPC id. A client
   * that gives up on a call (the MCP SDK's request timeout) keeps its POST open and sends
   * notifications/cancelled in another POST, which a stateless server's transport cannot match:
   * it is matched here, and stops the call when exactly one in flight has that key. Only within
   * the session: clients number their requests alike (the SDK's from 0), and many share an
   * address (every stdio relay on a machine, every client behind an ingress), so neither the id
   * nor the address tells one client's call from another's. A request without a session id can
   * be cancelled by no notification (its client gives up by closing its connection).
   */
  private readonly calls = new Map<string, Set<AbortController>>();

  private callKey(project: string, session: string | undefined, id: unknown): string | undefined {
    if (session === undefined || (typeof id !== 'string' && typeof id !== 'number')) return undefined;
    return `${project}\u0000${session}\u0000${typeof id}:${id}`;
  }

  /** A tool's fault (neatroots', not the caller's): the agent is told it was logged, so it is. */
  private logFault(project: string, msg: string, err: unknown): void {
    if (this.log) this.log.error(msg, err, { project });
    else new NestLogger('api').error(`${msg} (project ${project}): ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  }

  @Post(MCP_PATH.slice(1))
  async post(@Req() req: McpRequest, @Res() res: ServerResponse) {
    // The guard let the key in (a full one: an ingest key gets 403); the project is the one it
    // opens, as resolved before the body was read (a POST without a body: resolved again).
    const key = apiKeyOf(req) ?? '';
    const project = req.keyProject?.key === key ? req.keyProject.project : apiProjectOf(await this.resolveKey(key));
    // Aborted when the call is given up: its connection closed before the answer, or the client cancelled it.
    const stop = new AbortController();
    givenUp(res, stop);
    const msg = messageOf(req.body);
    // A session of its own for each client that initializes (the transport is stateless and sets none).
    if (msg?.method === 'initialize') res.setHeader(SESSION_HEADER, randomUUID());
    const session = sessionOf(req);
    const call = msg?.method === 'tools/call' && !stop.signal.aborted ? this.callKey(project, session, msg.id) : undefined;
    if (call) this.calls.set(call, (this.calls.get(call) ?? new Set()).add(stop));
    if (msg?.method === 'notifications/cancelled') {
      const cancelled = this.calls.get(this.callKey(project, session, msg.params?.requestId) ?? '');
      // Two calls in flight with this key (a client that sent one id twice): neither is stopped.
      if (cancelled?.size === 1) for (const c of cancelled) c.abort();
    }
    const server = createMcpServer(
      { project, authoring: this.authoring && forCall(this.authoring, stop.signal), queries: this.queries, log: (msg, err) => this.logFault(project, msg, err) },
      VERSION,
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      const inFlight = call ? this.calls.get(call) : undefined;
      if (inFlight?.delete(stop) && !inFlight.size) this.calls.delete(call!);
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }

  /** No stream to open and no session to end: the server is stateless. */
  @All(MCP_PATH.slice(1))
  other(@Res() res: ServerResponse) {
    res.writeHead(405, { 'content-type': 'application/json', allow: 'POST' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless; POST JSON-RPC messages' }, id: null }));
  }
}
