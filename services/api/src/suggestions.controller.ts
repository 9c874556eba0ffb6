import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { SUGGESTION_STATUSES, type ListSuggestionsQuery, type ReviewSopQueries, type SuggestionStatus } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { limitParam, noQuery, oneOf, parseQuery, pathId, textParam, type QueryParams } from './params';
import { REVIEW_SOP_QUERIES } from './tokens';

const MAX_LIST = 500;

/** `status` may be repeated (?status=proposed&status=pr_open); pattern, limit and before are given once. */
function listQuery(query: QueryParams): ListSuggestionsQuery {
  const { status, ...rest } = query;
  const q: ListSuggestionsQuery = parseQuery(rest, { pattern: textParam, limit: limitParam(MAX_LIST), before: textParam }, ['status']);
  if (status === undefined) return q;
  const parse = oneOf<SuggestionStatus>(SUGGESTION_STATUSES);
  const given = Array.isArray(status) ? status : [status];
  q.status = given.map((s) => {
    if (typeof s !== 'string') throw ApiError.badRequest('invalid_query', 'status must be given as text, once per status (?status=proposed&status=pr_open)');
    return parse(s, 'status');
  });
  return q;
}

/** An optional JSON object body ({} when none). */
function optionalBody(body: unknown, what: string): Record<string, unknown> {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', `the body must be a JSON object: ${what}`);
  return body as Record<string, unknown>;
}

/**
 * Suggestions (docs/suggestions.md): made from a pattern's verdict by the reasoning model, read
 * with their freshness, applied as a pull request or a draft, rewritten, dismissed. Thin: parse,
 * ask the review service (which checks bodies again, so both transports refuse the same things).
 */
@Controller('v1/workspaces/:ws')
@UseGuards(ApiKeyGuard)
export class SuggestionsController {
  constructor(@Inject(REVIEW_SOP_QUERIES) private readonly review: ReviewSopQueries | null) {}

  private q(): ReviewSopQueries {
    if (!this.review) throw ApiError.notServed('suggestions are not served by this api');
    return this.review;
  }

  /** {reviewer?}: a new suggestion for the pattern's verdict, generating; 409 unless real, acceptable or sop_wrong. */
  @Post('patterns/:id/suggest')
  @HttpCode(202)
  async suggest(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().suggest(ws, pathId('id', id), optionalBody(body, '{"reviewer": "..."}'));
  }

  @Get('suggestions')
  async list(@Param('ws') ws: string, @Query() query: QueryParams) {
    return this.q().listSuggestions(ws, listQuery(query));
  }

  @Get('suggestions/:id')
  async get(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams) {
    noQuery(query);
    return this.q().getSuggestion(ws, pathId('id', id));
  }

  /** {reviewer?}: a pull request with a GitHub connection, else a draft at head; 409 unless proposed and not in conflict. */
  @Post('suggestions/:id/apply')
  @HttpCode(200)
  async apply(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().applySuggestion(ws, pathId('id', id), optionalBody(body, '{"reviewer": "..."}'));
  }

  /** {reviewer?}: a new suggestion against the file as it is now, generating; the old one dismissed. */
  @Post('suggestions/:id/rewrite')
  @HttpCode(202)
  async rewrite(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().rewriteSuggestion(ws, pathId('id', id), optionalBody(body, '{"reviewer": "..."}'));
  }

  /** {note?, reviewer?} */
  @Post('suggestions/:id/dismiss')
  @HttpCode(200)
  async dismiss(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().dismissSuggestion(ws, pathId('id', id), optionalBody(body, '{"note": "...", "reviewer": "..."}'));
  }
}
