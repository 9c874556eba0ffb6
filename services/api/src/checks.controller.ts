import type { ServerResponse } from 'node:http';
import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Query, Res, UseGuards } from '@nestjs/common';
import { ApiKeyGuard } from './auth.guard';
import type { Author, Authoring, CheckSubmission } from './authoring';
import { ApiError } from './errors';
import { MAX_PREVIEW_MODEL_CALLS, MAX_PREVIEW_MS, MAX_PREVIEW_RUNS } from './limits';
import { noBody, noQuery, pathId, type QueryParams } from './params';
import { AUTHORING } from './tokens';

/**
 * Checks written by people (issue 14; the MCP tools call the same Authoring): draft from a
 * concern, validate, preview on recent runs, save, list, update, delete, switch a rule to halt. Thin:
 * parse the body, ask the authoring side, shape the JSON. GET checks/stats and
 * checks/disabled are served by their own controllers, registered before this one.
 */

type Obj = Record<string, unknown>;

function objectBody(body: unknown, example: string): Obj {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', `the body must be a JSON object: ${example}`);
  return body as Obj;
}

function onlyFields(b: Obj, allowed: readonly string[]): void {
  const unknown = Object.keys(b).filter((k) => !allowed.includes(k));
  if (unknown.length) throw ApiError.badRequest('invalid_body', `unknown field ${unknown.join(', ')} in the body; it takes ${allowed.join(', ')}`);
}

/** {yaml} (a check file's text) or {check} (the check as an object), not both. */
function submission(b: Obj): CheckSubmission {
  const { yaml, check } = b;
  if (yaml !== undefined && check !== undefined) throw ApiError.badRequest('invalid_body', 'give the check once: yaml (its YAML text) or check (a JSON object), not both');
  if (yaml !== undefined) {
    if (typeof yaml !== 'string' || !yaml.trim()) throw ApiError.badRequest('invalid_body', 'yaml must be the text of a check file (a non-empty string)');
    return { yaml };
  }
  if (check !== undefined) {
    if (!check || typeof check !== 'object' || Array.isArray(check)) throw ApiError.badRequest('invalid_body', 'check must be a JSON object (id, kind, ...)');
    return { check: check as Obj };
  }
  throw ApiError.badRequest('invalid_body', 'the check is missing: give yaml (its YAML text) or check (a JSON object)');
}

/** Who writes: the app unless the CLI says so (a coding agent writes over MCP). */
function author(b: Obj): Author {
  if (b.by === undefined) return 'app';
  if (b.by === 'app' || b.by === 'cli') return b.by;
  throw ApiError.badRequest('invalid_body', 'by must be app or cli (coding agents write through the MCP tools)');
}

function count(b: Obj, name: string, max: number): number | undefined {
  const v = b[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw ApiError.badRequest('invalid_body', `${name} must be an integer from 1 to ${max}`);
  return v;
}

/**
 * Aborted when the caller goes before its answer (its connection closed first: a client that
 * gave up, timed out or was stopped): a preview then stops and frees its place.
 */
export function givenUp(res: ServerResponse, ac = new AbortController()): AbortSignal {
  if (res.destroyed || res.socket?.destroyed) ac.abort();
  else res.on('close', () => !res.writableFinished && ac.abort());
  return ac.signal;
}

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class ChecksController {
  constructor(@Inject(AUTHORING) private readonly authoring: Authoring | null) {}

  private a(): Authoring {
    if (!this.authoring) throw ApiError.notServed('checks are not written through this api (no authoring side configured)');
    return this.authoring;
  }

  /** Every check in effect in the project (library, yours, the project's, the database's), and database checks that are not. */
  @Get('checks')
  async list(@Param('project') project: string, @Query() query: QueryParams) {
    noQuery(query);
    return { checks: await this.a().list(project) };
  }

  /** {concern, workflow?}: a rule for an order of calls or a limit, else a question; not saved. */
  @Post('checks/draft')
  @HttpCode(200)
  async draft(@Param('project') project: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const b = objectBody(body, '{"concern": "refunds issued without an order lookup"}');
    onlyFields(b, ['concern', 'workflow']);
    if (typeof b.concern !== 'string' || !b.concern.trim()) throw ApiError.badRequest('invalid_body', 'concern must be a non-empty string: what should not happen, in plain words');
    if (b.workflow !== undefined && (typeof b.workflow !== 'string' || !b.workflow)) throw ApiError.badRequest('invalid_body', 'workflow must be a non-empty string');
    return this.a().draft(project, b.concern, { workflow: b.workflow as string | undefined });
  }

  /** {yaml | check, runs?, model_calls?, time_ms?}: what the check would flag on the project's recent runs; nothing is saved. */
  @Post('checks/preview')
  @HttpCode(200)
  async preview(@Param('project') project: string, @Query() query: QueryParams, @Body() body: unknown, @Res({ passthrough: true }) res: ServerResponse) {
    noQuery(query);
    const b = objectBody(body, '{"yaml": "id: ...", "runs": 20}');
    onlyFields(b, ['yaml', 'check', 'runs', 'model_calls', 'time_ms', 'by']);
    const opts = { runs: count(b, 'runs', MAX_PREVIEW_RUNS), model_calls: count(b, 'model_calls', MAX_PREVIEW_MODEL_CALLS), time_ms: count(b, 'time_ms', MAX_PREVIEW_MS), by: author(b) };
    // A client that gives up stops the preview: no more model calls, and its place is free at once.
    return this.a().preview(project, submission(b), { ...opts, signal: givenUp(res) });
  }

  /** {yaml | check, by?}: refuses exactly what POST checks would, without saving or running anything (the app's live validation). */
  @Post('checks/validate')
  @HttpCode(200)
  async validate(@Param('project') project: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const b = objectBody(body, '{"yaml": "id: ..."}');
    onlyFields(b, ['yaml', 'check', 'by']);
    return this.a().validate(project, submission(b), { by: author(b) });
  }

  /** {yaml | check, by?}: saves a database check of the project (created or replaced). */
  @Post('checks')
  @HttpCode(200)
  async save(@Param('project') project: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const b = objectBody(body, '{"yaml": "id: ..."}');
    onlyFields(b, ['yaml', 'check', 'by']);
    return this.a().save(project, submission(b), { by: author(b) });
  }

  @Get('checks/:id')
  async get(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams) {
    noQuery(query);
    const check = await this.a().get(project, pathId('id', id));
    if (!check) throw ApiError.notFound(`no check ${id} in project ${project}`);
    return { check };
  }

  /** {yaml | check, by?}: replaces the project's database check `id` (the check's id must be `id`). */
  @Put('checks/:id')
  async update(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const b = objectBody(body, '{"yaml": "id: ..."}');
    onlyFields(b, ['yaml', 'check', 'by']);
    return this.a().save(project, submission(b), { by: author(b), id: pathId('id', id) });
  }

  @Delete('checks/:id')
  async remove(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    await this.a().remove(project, pathId('id', id), 'app');
    return { deleted: id };
  }

  /** Switches a database rule of yours to action: halt (refused for library checks and checks an agent wrote). */
  @Post('checks/:id/halt')
  @HttpCode(200)
  async halt(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const b = objectBody(body, '{"by": "cli"}');
    onlyFields(b, ['by']);
    return this.a().halt(project, pathId('id', id), author(b));
  }
}
