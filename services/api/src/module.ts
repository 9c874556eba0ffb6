import type { AddressInfo } from 'node:net';
import { DISABLED_CHECKS_BOARD, disabledChecksFor, sharedDisabledChecks } from '@neatroots/checks';
import type { ServiceModule } from '@neatroots/ports';
import type { ReviewQueries, ReviewSopQueries, SopQueries } from '@neatroots/store';
import { createApi } from './api';
import type { Authoring } from './authoring';
import { cachedKeys } from './key-cache';
import type { ModelStats, ResolveKey } from './tokens';

/** The configuration the api reads. */
export interface ApiConfig {
  NEATROOTS_HOST: string;
  NEATROOTS_HTTP_PORT: number;
  /** Where a rule engine on this machine lists the checks it disabled (see checks/disabled). */
  NEATROOTS_HOME: string;
  /** Origins whose pages may call the API from a browser (CORS); none by default. */
  NEATROOTS_API_CORS_ORIGINS: string[];
}

interface Links {
  review: { queries: ReviewQueries; resolveKey: ResolveKey; sop?: SopQueries; reviewSop?: ReviewSopQueries };
  question: { modelStats: ModelStats };
}

/**
 * The REST API as a module (NestJS stays inside it): it asks the review service and the
 * question service, in-process or over gRPC. An edge: it stops accepting first on shutdown.
 */
export const apiModule: ServiceModule<ApiConfig> = {
  name: 'api',
  needs: ['review', 'question'],
  edge: true,
  async start(ctx) {
    const review = await ctx.link<Links['review']>('review');
    const question = await ctx.link<Links['question']>('question');
    // Supplied by the composition root; a process without one answers the checks endpoints 503.
    const authoring = await ctx.link<Authoring>('authoring').catch((err: Error) => {
      if (/no service of this process provides it/.test(err.message)) return undefined;
      throw err;
    });
    // Distributed, the rule engines run in other processes, most often on other machines: what
    // they disabled is on the deployment's board (a rule engine on this machine's home is read too).
    const board = ctx.platform.sharedBoard ? await ctx.platform.sharedBoard(DISABLED_CHECKS_BOARD) : undefined;
    if (ctx.platform.kind === 'distributed' && !board) {
      ctx.log.info('api: NEATROOTS_REDIS_URL is not set: GET .../checks/disabled lists only the checks disabled by a rule engine on this machine (NEATROOTS_HOME)');
    }
    const api = await createApi({
      queries: review.queries,
      // Distributed, each lookup is a call to the review service: kept a while, and a key
      // granted before still opens its project while the service cannot answer.
      resolveKey: ctx.platform.kind === 'distributed' ? cachedKeys(review.resolveKey) : review.resolveKey,
      modelStats: question.modelStats,
      sop: review.sop,
      review: review.reviewSop,
      authoring,
      disabledChecks: async (project) => disabledChecksFor(ctx.config.NEATROOTS_HOME, project, board ? ((await sharedDisabledChecks(board)) ?? []) : []),
      port: ctx.config.NEATROOTS_HTTP_PORT,
      host: ctx.config.NEATROOTS_HOST,
      corsOrigins: ctx.config.NEATROOTS_API_CORS_ORIGINS,
      log: ctx.log,
    });
    return { ports: { http: (api.getHttpServer().address() as AddressInfo).port }, stop: () => api.close() };
  },
};
