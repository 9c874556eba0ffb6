import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { MAX_PAGE, type ReviewQueries } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { cursorParam, limitParam, parseQuery, type QueryParams } from './params';
import { REVIEW_QUERIES } from './tokens';

/**
 * GET /v1/projects/{project}/dead-letters: what was set aside in the project, newest first,
 * each with its reason and the item as JSON text (docs/operations.md, "Dead letters").
 * Paged like the other lists (limit, cursor → next_cursor).
 */
@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class DeadLettersController {
  constructor(@Inject(REVIEW_QUERIES) private readonly queries: ReviewQueries) {}

  @Get('dead-letters')
  async list(@Param('project') project: string, @Query() query: QueryParams) {
    const page = await this.queries.listDeadLetters(project, parseQuery(query, { limit: limitParam(MAX_PAGE), cursor: cursorParam }));
    return { dead_letters: page.items, next_cursor: page.next_cursor };
  }
}
