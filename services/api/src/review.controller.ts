import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import type { OverrideInput, PatternsQuery, ReclusterInput, RenameInput, ReviewSopQueries, ReviewStateName, VerdictInput, WindowQuery } from '@neatroots/store';
import type { CalibrateInput } from '@neatroots/store';
import { ApiKeyGuard } from './auth.guard';
import { ApiError } from './errors';
import { cursorParam, limitParam, noQuery, oneOf, parseQuery, pathId, textParam, type QueryParams } from './params';
import { REVIEW_SOP_QUERIES } from './tokens';

/**
 * The review side of a workspace: the review queue, rule patterns, verdicts, overrides,
 * regression sets and Insights (docs/review.md). Thin: parse, ask the review service, shape
 * the JSON. Bodies are checked field by field in the review service, so both transports
 * refuse the same things the same way.
 */

const STATES: readonly ReviewStateName[] = ['needs_review', 'open', 'fixing', 'fixed', 'regressed', 'closed'];
const MAX_QUEUE = 500;
const MAX_PATTERNS = 500;
const MAX_DAYS = 3650;

/** The window and filters of Insights and the patterns list; from/to are checked by the service (ISO-8601). */
function windowQuery(query: QueryParams): WindowQuery {
  return parseQuery(query, { days: limitParam(MAX_DAYS), from: textParam, to: textParam, procedure: textParam, rule: textParam });
}

/** The patterns list: the window and filters, and a page (limit 1 to 500, default 100, and cursor). */
function patternsQuery(query: QueryParams): PatternsQuery {
  return parseQuery(query, { days: limitParam(MAX_DAYS), from: textParam, to: textParam, procedure: textParam, rule: textParam, limit: limitParam(MAX_PATTERNS), cursor: cursorParam });
}

/** `state` may be repeated (?state=open&state=closed); every other parameter is given once. */
function queueQuery(query: QueryParams): { state?: ReviewStateName[]; limit?: number } {
  const { state, ...rest } = query;
  const q = parseQuery(rest, { state: textParam, limit: limitParam(MAX_QUEUE) });
  if (state === undefined) return q.limit === undefined ? {} : { limit: q.limit };
  const given = Array.isArray(state) ? state : [state];
  const parse = oneOf<ReviewStateName>(STATES);
  const states = given.map((s) => {
    if (typeof s !== 'string') throw ApiError.badRequest('invalid_query', 'state must be given as text, once per state (?state=open&state=closed)');
    return parse(s, 'state');
  });
  return { state: [...new Set(states)], ...(q.limit === undefined ? {} : { limit: q.limit }) };
}

/** What the regression endpoint uses of an express response (@types/express is not installed). */
interface HeaderResponse {
  setHeader(name: string, value: string): void;
}

function objectBody(body: unknown, what: string): Record<string, unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('invalid_body', `the body must be a JSON object: ${what}`);
  return body as Record<string, unknown>;
}

@Controller('v1/workspaces/:ws')
@UseGuards(ApiKeyGuard)
export class ReviewController {
  constructor(@Inject(REVIEW_SOP_QUERIES) private readonly review: ReviewSopQueries | null) {}

  private q(): ReviewSopQueries {
    if (!this.review) throw ApiError.notServed('review (patterns, verdicts, insights) is not served by this api');
    return this.review;
  }

  /** The review queue: active leaf patterns in the states asked for (default needs_review and regressed), most sessions first. */
  @Get('review')
  async queue(@Param('ws') ws: string, @Query() query: QueryParams) {
    return this.q().reviewQueue(ws, queueQuery(query));
  }

  @Get('patterns')
  async patterns(@Param('ws') ws: string, @Query() query: QueryParams) {
    return this.q().patterns(ws, patternsQuery(query));
  }

  /** {all?}: names rule patterns with the reasoning model; answers {renamed, failed, reason}. */
  @Post('patterns/rename')
  @HttpCode(200)
  async rename(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().renamePatterns(ws, (body === undefined || body === null || body === '' ? {} : objectBody(body, '{"all": true}')) as RenameInput);
  }

  /** {procedure?, rule?, force?}: assigns, reclusters what is due, regroups themes (calls the models); answers {assigned, reclustered, themed, reason}. */
  @Post('patterns/recluster')
  @HttpCode(200)
  async recluster(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().recluster(ws, (body === undefined || body === null || body === '' ? {} : objectBody(body, '{"procedure"?: "...", "rule"?: "...", "force"?: true}')) as ReclusterInput);
  }

  /** {procedure?, dry_run?}: fits the check thresholds to the labels (the sopops_calibrate job, waited for). */
  @Post('calibrate')
  @HttpCode(200)
  async calibrate(@Param('ws') ws: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().calibrate(ws, (body === undefined || body === null || body === '' ? {} : objectBody(body, '{"procedure"?: "take-order", "dry_run"?: true}')) as CalibrateInput);
  }

  @Get('patterns/:id')
  async pattern(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams) {
    return this.q().pattern(ws, pathId('id', id), windowQuery(query));
  }

  /** {verdict, note?, reviewer?, suggest?}: appended; answers the verdict with suppressed_count. */
  @Post('patterns/:id/verdict')
  @HttpCode(201)
  async verdict(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().giveVerdict(ws, pathId('id', id), objectBody(body, '{"verdict": "real", "note": "...", "reviewer": "..."}') as unknown as VerdictInput);
  }

  /** {correct, note?, reviewer?}: answers the override and whether the finding is now suppressed. */
  @Post('findings/:id/override')
  @HttpCode(201)
  async override(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Body() body: unknown) {
    noQuery(query);
    return this.q().overrideFinding(ws, pathId('id', id), objectBody(body, '{"correct": false, "note": "...", "reviewer": "..."}') as unknown as OverrideInput);
  }

  /** One JSON line per finding in the pattern (409, as JSON, without a verdict). */
  @Get('patterns/:id/regression')
  async regression(@Param('ws') ws: string, @Param('id') id: string, @Query() query: QueryParams, @Res({ passthrough: true }) res: HeaderResponse) {
    noQuery(query);
    const lines = await this.q().regression(ws, pathId('id', id));
    // Set once the lines exist: an error leaves as the usual JSON.
    res.setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
    return lines.map((l) => `${JSON.stringify(l)}\n`).join('');
  }

  @Get('insights')
  async insights(@Param('ws') ws: string, @Query() query: QueryParams) {
    return this.q().insights(ws, windowQuery(query));
  }

  /** Two releases side by side (from, to: a release's id, number or live; procedure). */
  @Get('insights/compare')
  async compare(@Param('ws') ws: string, @Query() query: QueryParams) {
    return this.q().compareReleases(ws, parseQuery(query, { from: textParam, to: textParam, procedure: textParam }));
  }
}
