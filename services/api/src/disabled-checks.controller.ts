import { Controller, Get, Inject, Param, UseGuards } from '@nestjs/common';
import { disabledView } from '@neatroots/checks';
import { ApiKeyGuard } from './auth.guard';
import { DISABLED_CHECKS, type DisabledChecksLookup } from './tokens';

/**
 * GET /v1/projects/{project}/checks/disabled: the `match` checks that run in the project and
 * were disabled because their pattern went over the time limit on a span, each with its
 * reason, until the neatroots that disabled them restarts (docs/checks.md, "Patterns are safe").
 */
@Controller('v1/projects/:project')
@UseGuards(ApiKeyGuard)
export class DisabledChecksController {
  constructor(@Inject(DISABLED_CHECKS) private readonly lookup: DisabledChecksLookup | null) {}

  @Get('checks/disabled')
  async list(@Param('project') project: string) {
    // The documented fields only: a check's applies_to names other projects.
    return { checks: this.lookup ? (await this.lookup(project)).map(disabledView) : [] };
  }
}
