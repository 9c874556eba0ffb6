import { Body, Controller, Delete, Get, Inject, Param, Put, Query, UseGuards } from '@nestjs/common';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { noBody, noQuery, type QueryParams } from './params';

/** The GitHub connections of the review service (GitHubConnections in @neatroots/review), in-process or over gRPC. */
export const GITHUB_CONNECTIONS = Symbol('GitHubConnections');

/** What the endpoints call; the review service checks the body, so both transports refuse the same things. */
export interface GitHubConnectionsApi {
  put(workspace: string, body: unknown): Promise<unknown>;
  get(workspace: string): Promise<unknown>;
  delete(workspace: string): Promise<{ deleted: true }>;
}

/**
 * A workspace's GitHub repository connection: where an applied suggestion opens its pull
 * request (docs/suggestions.md, "Pull requests"). The token goes in and never comes out:
 * answers say has_token and its last four characters.
 */
@Controller('v1/workspaces/:ws/github')
@UseGuards(ApiKeyGuard)
export class GitHubController {
  constructor(@Inject(GITHUB_CONNECTIONS) private readonly connections: GitHubConnectionsApi | null) {}

  private c(): GitHubConnectionsApi {
    if (!this.connections) throw ApiError.notServed('GitHub connections are not served by this api');
    return this.connections;
  }

  @Put()
  async put(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.c().put(ws, body);
  }

  @Get()
  async get(@Param('ws') ws: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.c().get(ws);
  }

  @Delete()
  async delete(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    return this.c().delete(ws);
  }
}
