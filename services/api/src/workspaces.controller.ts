import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Query, UseGuards } from '@nestjs/common';
import { MAX_PAGE, SopError, type SopQueries, type SopResult } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { FILE_TEXT_BODY } from './body';
import { ApiError } from './errors';
import { cursorParam, limitParam, noBody, noQuery, oneOf, parseQuery, pathId, textParam, timeParam, type QueryParams } from './params';
import { SOP_QUERIES } from './tokens';

/**
 * The sopops endpoints of a workspace (the sopops name for a project: the same id, the same
 * API keys): its procedures at head, its releases, its sessions and their checks. Thin: parse,
 * ask the review service, shape the JSON.
 */

const RESULTS: readonly SopResult[] = ['deviated', 'partial', 'followed', 'not_measurable'];

/** A path under head: a file of the procedures folder, given as one or several segments. */
function headPath(p: string | string[]): string {
  const path = Array.isArray(p) ? p.join('/') : p;
  return pathId('path', path);
}

function filesBody(body: unknown): { path: string; text: string }[] {
  const files = (body as { files?: unknown } | null)?.files;
  if (!body || typeof body !== 'object' || Array.isArray(body) || !Array.isArray(files)) {
    throw ApiError.badRequest('invalid_body', 'the body must be {"files": [{"path": "procedures/x.md", "text": "..."}]}');
  }
  const unknown = Object.keys(body).filter((k) => k !== 'files');
  if (unknown.length) throw ApiError.badRequest('invalid_body', `unknown field ${unknown.join(', ')} in the body; it takes files`);
  return files.map((f, i) => {
    if (!f || typeof f !== 'object' || typeof f.path !== 'string' || typeof f.text !== 'string') {
      throw ApiError.badRequest('invalid_body', `files[${i}] must be {"path": string, "text": string}`);
    }
    const extra = Object.keys(f).find((k) => k !== 'path' && k !== 'text');
    if (extra !== undefined) throw ApiError.badRequest('invalid_body', `files[${i}].${extra.slice(0, 100)}: unknown field (known: path, text)`);
    return { path: pathId(`files[${i}].path`, f.path), text: f.text };
  });
}

@Controller('v1/workspaces/:ws')
@UseGuards(ApiKeyGuard)
export class WorkspacesController {
  constructor(@Inject(SOP_QUERIES) private readonly sop: SopQueries | null) {}

  private q(): SopQueries {
    if (!this.sop) throw ApiError.notServed('procedures are not served by this api');
    return this.sop;
  }

  /** Head's files and the unpublished changes (a unified diff against the live release). */
  @Get('head')
  async head(@Param('ws') ws: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.q().head(ws);
  }

  /** sopops push: the folder becomes head as a whole, or nothing changes (422 with sopc's errors). */
  @Put('head')
  async push(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().pushHead(ws, filesBody(body));
  }

  /** One file at head: its text and version, to edit it (404 when head has no such file). */
  @Get('head/*path')
  async file(@Param('ws') ws: string, @Param('path') path: string | string[], @Query() query: QueryParams) {
    noQuery(query);
    return this.q().headFile(ws, headPath(path));
  }

  /** One file saved at head; the body is its text. 422 with sopc's errors when head would not compile. */
  @Put('head/*path')
  async saveFile(@Param('ws') ws: string, @Param('path') path: string | string[], @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    if (typeof body !== 'string') throw ApiError.badRequest('invalid_body', `the body is ${FILE_TEXT_BODY}`);
    return this.q().saveHeadFile(ws, headPath(path), body);
  }

  @Delete('head/*path')
  async deleteFile(@Param('ws') ws: string, @Param('path') path: string | string[], @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    const p = headPath(path);
    await this.q().deleteHeadFile(ws, p);
    return { path: p, deleted: true };
  }

  /** Publishes head as the next numbered release and makes it live. */
  @Post('releases')
  @HttpCode(201)
  async publish(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    return this.q().publish(ws);
  }

  /**
   * Newest first, with the next page's cursor (null: the last page). `fields=summary`: each
   * release's procedures as id, name, version and rule_count, and its agent_count, without the
   * rules and agents themselves; `limit` (1 to 500) and `cursor` page; without a limit, all.
   */
  @Get('releases')
  async releases(@Param('ws') ws: string, @Query() query: QueryParams) {
    const q = parseQuery(query, { fields: oneOf(['summary'] as const), limit: limitParam(MAX_PAGE), cursor: cursorParam });
    return this.q().releases(ws, q);
  }

  /** `id`: the release's id, its number, or `live`. */
  @Get('releases/:id')
  async release(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.q().release(ws, pathId('id', id));
  }

  /**
   * A session in: 202 {id, external_id, status}: queued, or unchanged for re-sent content (but
   * for one whose check is owed: still queued, failed, or checked while the model failed).
   */
  @Post('sessions')
  @HttpCode(202)
  async receive(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', 'the body must be a session as a JSON object');
    return this.q().receiveSession(ws, body);
  }

  @Get('sessions')
  async sessions(@Param('ws') ws: string, @Query() query: QueryParams) {
    const q = parseQuery(query, {
      agent: textParam,
      procedure: textParam,
      result: oneOf<SopResult>(RESULTS),
      release: textParam,
      rule: textParam,
      from: timeParam,
      to: timeParam,
      cursor: cursorParam,
      limit: limitParam(MAX_PAGE),
    });
    // `live`, as a session's release_id and releases/live take it: the live release's id (none live: no session is on it).
    if (q.release === 'live') {
      try {
        q.release = (await this.q().release(ws, 'live')).id;
      } catch (e) {
        if (e instanceof SopError && e.status === 404) return { items: [], next_cursor: null };
        throw e;
      }
    }
    return this.q().listSessions(ws, q);
  }

  @Get('sessions/:id')
  async session(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.q().getSession(ws, pathId('id', id));
  }

  /**
   * The session as stored checked again (202 {id, external_id, status: queued}), its results
   * replaced when the check is done: for a session nobody can send again (made from a run), once
   * the model is back or its settings changed. 409 transcript_expired once retention emptied it.
   */
  @Post('sessions/:id/recheck')
  @HttpCode(202)
  async recheck(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    return this.q().recheckSession(ws, pathId('id', id));
  }

  /** The session as received: its turns (numbered from 0) and tool calls, for showing the transcript. */
  @Get('sessions/:id/transcript')
  async transcript(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.q().getSessionTranscript(ws, pathId('id', id));
  }
}
