import type { IncomingMessage, ServerResponse } from 'node:http';
import { All, Controller, Inject, Logger as NestLogger, Post, Req, Res, UseGuards } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '@neatroots/ports';
import type { ReviewQueries } from '@neatroots/store';
import { apiKeyOf, ApiKeyGuard, type KeyedRequest } from '../auth.guard';
import type { Authoring } from '../authoring';
import { ApiError } from '../errors';
import { API_LOG, AUTHORING, RESOLVE_KEY, REVIEW_QUERIES, type ResolveKey } from '../tokens';
import { MCP_PATH } from './relay';
import { createMcpServer } from './tools';

/**
 * The MCP tools over streamable HTTP, at POST /v1/mcp: the API key (x-api-key or
 * Authorization: Bearer) opens one project and every tool acts in it. Stateless: each request
 * gets a server and a transport of its own (the SDK's stateless mode), so any api replica
 * answers any request and nothing is kept between them; answers are JSON, not streams.
 */

type McpRequest = IncomingMessage & KeyedRequest & { body?: unknown };

const VERSION = '0.1.0';

@Controller()
@UseGuards(ApiKeyGuard)
export class McpController {
  constructor(
    @Inject(AUTHORING) private readonly authoring: Authoring | null,
    @Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries,
    @Inject(RESOLVE_KEY) private readonly resolveKey: ResolveKey,
    @Inject(API_LOG) private readonly log: Logger | null,
  ) {}

  /** A tool's fault (neatroots', not the caller's): the agent is told it was logged, so it is. */
  private logFault(project: string, msg: string, err: unknown): void {
    if (this.log) this.log.error(msg, err, { project });
    else new NestLogger('api').error(`${msg} (project ${project}): ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  }

  @Post(MCP_PATH.slice(1))
  async post(@Req() req: McpRequest, @Res() res: ServerResponse) {
    // The guard let the key in; the project is the one it opens.
    const project = await this.resolveKey(apiKeyOf(req) ?? '');
    if (!project) throw new ApiError(401, 'unauthorized', 'unknown API key');
    const server = createMcpServer(
      { project, authoring: this.authoring, queries: this.queries, log: (msg, err) => this.logFault(project, msg, err) },
      VERSION,
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
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
