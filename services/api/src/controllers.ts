import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import type { ReviewQueries } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { dismissBody, findingsQuery, noBody, noQuery, parseQuery, pathId, runQuery, runsQuery, spansQuery, textParam, type QueryParams } from './params';
import { MODEL_STATS, REVIEW_QUERIES, type ModelStats } from './tokens';

/** Thin: parse, ask the review service, shape the JSON. */

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class RunsController {
  constructor(@Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries) {}

  @Get('runs')
  async list(@Param('project') project: string, @Query() query: QueryParams) {
    const page = await this.queries.listRuns(project, runsQuery(query));
    return { runs: page.items, next_cursor: page.next_cursor };
  }

  /**
   * The run page: the first page of its spans, with `spans_next_cursor` for the rest; with
   * `since` (an earlier answer's `spans_since`), the spans stored since instead.
   */
  @Get('runs/:run_id')
  async get(@Param('project') project: string, @Param('run_id') runId: string, @Query() query: QueryParams) {
    const run = await this.queries.getRun(project, pathId('run_id', runId), runQuery(query));
    if (!run) throw ApiError.notFound(`no run ${runId} in project ${project}`);
    return run;
  }

  @Get('runs/:run_id/spans')
  async spans(@Param('project') project: string, @Param('run_id') runId: string, @Query() query: QueryParams) {
    const q = spansQuery(query);
    const page = await this.queries.listSpans(project, pathId('run_id', runId), q);
    if (!page) throw ApiError.notFound(`no run ${runId} in project ${project}`);
    return {
      spans: page.items,
      next_cursor: page.next_cursor,
      ...(page.cut_at_bytes !== undefined ? { cut_at_bytes: page.cut_at_bytes } : {}),
      ...(page.since !== undefined ? { since: page.since } : {}),
    };
  }

  /** One span whole: what the run page shows of the span selected (its list gives previews). */
  @Get('runs/:run_id/spans/:span_id')
  async span(@Param('project') project: string, @Param('run_id') runId: string, @Param('span_id') spanId: string, @Query() query: QueryParams) {
    noQuery(query);
    const span = await this.queries.getSpan(project, pathId('run_id', runId), pathId('span_id', spanId));
    if (!span) throw ApiError.notFound(`no span ${spanId} in run ${runId} of project ${project}`);
    return { span };
  }
}

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class FindingsController {
  constructor(@Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries) {}

  @Get('findings')
  async list(@Param('project') project: string, @Query() query: QueryParams) {
    const page = await this.queries.listFindings(project, findingsQuery(query));
    return { findings: page.items, next_cursor: page.next_cursor };
  }

  @Post('findings/:id/dismiss')
  @HttpCode(200)
  async dismiss(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    const finding = await this.queries.dismiss(project, pathId('id', id), dismissBody(body));
    if (!finding) throw ApiError.notFound(`no finding ${id} in project ${project}`);
    return { finding };
  }

  @Post('findings/:id/reopen')
  @HttpCode(200)
  async reopen(@Param('project') project: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    const finding = await this.queries.reopen(project, pathId('id', id));
    if (!finding) throw ApiError.notFound(`no finding ${id} in project ${project}`);
    return { finding };
  }

  @Get('checks/stats')
  async checkStats(@Param('project') project: string, @Query() query: QueryParams) {
    noQuery(query);
    return { checks: await this.queries.checkStats(project) };
  }
}

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class ModelsController {
  constructor(@Inject(MODEL_STATS) private readonly stats: ModelStats | null) {}

  /**
   * Per question of the project's checks: answers the LLM gave, how often the fast classifier
   * agreed, whether it answers first. Another project's questions are not this key's to see.
   */
  @Get('models/agreement')
  async agreement(@Param('project') project: string, @Query() query: QueryParams) {
    const q = parseQuery(query, { check_id: textParam });
    if (!this.stats) throw ApiError.notServed('model agreement is not served by this api (no question service in its configuration)');
    return { questions: await this.stats(project, q.check_id) };
  }
}

@Controller()
export class HealthController {
  @Get('healthz')
  health() {
    return { status: 'ok' };
  }
}
