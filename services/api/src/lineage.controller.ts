import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import type { LinkRuleInput, ReviewSopQueries, RuleLineageQuery } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { noBody, noQuery, parseQuery, pathId, textParam, type QueryParams } from './params';
import { REVIEW_SOP_QUERIES } from './tokens';

/**
 * Rule lineage (docs/procedures.md): which rule each reworded rule replaced, read, linked and
 * unlinked by hand, and rebuilt from the releases. Thin: parse, ask the review service (which
 * checks bodies again, so both transports refuse the same things the same way).
 */
@Controller('v1/workspaces/:ws/rules')
@UseGuards(ApiKeyGuard)
export class LineageController {
  constructor(@Inject(REVIEW_SOP_QUERIES) private readonly review: ReviewSopQueries | null) {}

  private q(): ReviewSopQueries {
    if (!this.review) throw ApiError.notServed('rule lineage is not served by this api');
    return this.review;
  }

  /** Recomputes the matched and suggestion links of every release (manual rows stay); idempotent. */
  @Post('lineage/rebuild')
  @HttpCode(200)
  async rebuild(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    noBody(body);
    return this.q().rebuildLineage(ws);
  }

  @Get(':rule_id/lineage')
  async get(@Param('ws') ws: string, @Param('rule_id') ruleId: string, @Query() query: QueryParams) {
    return this.q().ruleLineage(ws, pathId('rule_id', ruleId), lineageQuery(query));
  }

  /** {previous_rule_id, procedure_id?}: a manual link; 409 for a cycle. */
  @Post(':rule_id/lineage')
  @HttpCode(200)
  async link(@Param('ws') ws: string, @Param('rule_id') ruleId: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', 'the body must be a JSON object: {"previous_rule_id": "...", "procedure_id"?: "..."}');
    return this.q().linkRule(ws, pathId('rule_id', ruleId), body as LinkRuleInput);
  }

  /** The rule becomes a new rule (a manual row with no previous rule). */
  @Delete(':rule_id/lineage')
  async unlink(@Param('ws') ws: string, @Param('rule_id') ruleId: string, @Query() query: QueryParams, @Body() body: unknown) {
    noBody(body);
    return this.q().unlinkRule(ws, pathId('rule_id', ruleId), lineageQuery(query));
  }
}

function lineageQuery(query: QueryParams): RuleLineageQuery {
  return parseQuery(query, { procedure: textParam });
}
