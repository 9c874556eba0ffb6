import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import type { ReviewQueries } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { dismissBody, findingsQuery, runsQuery } from './params';
import { MODEL_STATS, REVIEW_QUERIES, type ModelStats } from './tokens';

/** Thin: parse, ask the review service, shape the JSON. */

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class RunsController {
  constructor(@Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries) {}

  @Get('runs')
  async list(@Param('project') project: string, @Query() query: Record<string, unknown>) {
    const page = await this.queries.listRuns(project, runsQuery(query));
    return { runs: page.items, next_cursor: page.next_cursor };
  }

  @Get('runs/:run_id')
  async get(@Param('project') project: string, @Param('run_id') runId: string) {
    const run = await this.queries.getRun(project, runId);
    if (!run) throw ApiError.notFound(`no run ${runId} in project ${project}`);
    return run;
  }
}

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class FindingsController {
  constructor(@Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries) {}

  @Get('findings')
  async list(@Param('project') project: string, @Query() query: Record<string, unknown>) {
    const page = await this.queries.listFindings(project, findingsQuery(query));
    return { findings: page.items, next_cursor: page.next_cursor };
  }

  @Post('findings/:id/dismiss')
  @HttpCode(200)
  async dismiss(@Param('project') project: string, @Param('id') id: string, @Body() body: unknown) {
    const finding = await this.queries.dismiss(project, id, dismissBody(body));
    if (!finding) throw ApiError.notFound(`no finding ${id} in project ${project}`);
    return { finding };
  }

  @Post('findings/:id/reopen')
  @HttpCode(200)
  async reopen(@Param('project') project: string, @Param('id') id: string) {
    const finding = await this.queries.reopen(project, id);
    if (!finding) throw ApiError.notFound(`no finding ${id} in project ${project}`);
    return { finding };
  }

  @Get('checks/stats')
  async checkStats(@Param('project') project: string) {
    return { checks: await this.queries.checkStats(project) };
  }
}

@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class ModelsController {
  constructor(@Inject(MODEL_STATS) private readonly stats: ModelStats | null) {}

  /** Per question: answers the LLM gave, how often the fast classifier agreed, whether it answers first. */
  @Get('models/agreement')
  async agreement(@Query('check_id') checkId?: string) {
    if (!this.stats) throw new ApiError(503, 'unavailable', 'the question service is not reachable from this api');
    if (checkId !== undefined && (typeof checkId !== 'string' || !checkId)) throw ApiError.badRequest('invalid_query', 'check_id must be a check id');
    return { questions: await this.stats(checkId) };
  }
}

@Controller()
export class HealthController {
  @Get('healthz')
  health() {
    return { status: 'ok' };
  }
}
