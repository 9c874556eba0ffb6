import 'reflect-metadata';
import { Module, type DynamicModule, type INestApplication, type LoggerService, type LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { drainHttpServer, type Logger } from '@neatroots/ports';
import type { ReviewQueries, ReviewSopQueries, SopQueries } from '@neatroots/store';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { defaultAppDir, serveApp } from './app-files';
import { ApiKeyGuard, keyBeforeBody } from './auth.guard';
import type { Authoring } from './authoring';
import { bodyParserErrors, parseBody, requireJsonBody } from './body';
import { allowCors } from './cors';
import { ChecksController } from './checks.controller';
import { FindingsController, HealthController, ModelsController, RunsController } from './controllers';
import { DeadLettersController } from './dead-letters.controller';
import { DisabledChecksController } from './disabled-checks.controller';
import { ErrorsFilter } from './errors';
import { McpController } from './mcp/mcp.controller';
import { LineageController } from './lineage.controller';
import { GITHUB_CONNECTIONS, GitHubController } from './github.controller';
import { ReviewController } from './review.controller';
import { securityHeaders } from './security-headers';
import { SuggestionsController } from './suggestions.controller';
import { API_LOG, AUTHORING, DISABLED_CHECKS, MODEL_STATS, RESOLVE_KEY, REVIEW_QUERIES, REVIEW_SOP_QUERIES, SOP_QUERIES, type DisabledChecksLookup, type ModelStats, type ResolveKey } from './tokens';
import { WorkspacesController } from './workspaces.controller';

export interface ApiOptions {
  /** The review service: in-process embedded, a gRPC client distributed. */
  queries: ReviewQueries;
  /** The project an API key opens and its scope (e.g. ProjectsRepo.resolveApiKey), null when unknown. */
  resolveKey: ResolveKey;
  /** 0 picks a free port. */
  port: number;
  /** Default: every interface. */
  host?: string;
  /** Agreement per question, for GET /v1/projects/{project}/models/agreement. */
  modelStats?: ModelStats;
  /** Checks disabled for a slow pattern, for GET /v1/projects/{project}/checks/disabled. */
  disabledChecks?: DisabledChecksLookup;
  /** The SOP side of the review service (procedures, releases, sessions); absent: its endpoints answer 503. */
  sop?: SopQueries;
  /** sopops review (patterns, verdicts, the queue, Insights); absent: its endpoints answer 503. */
  review?: ReviewSopQueries;
  /** Checks written by people (draft, preview, save, halt); absent: its endpoints answer 503. */
  authoring?: Authoring;
  /** Without `log`: Nest's own console logger at these levels (default error and warn); false for none. */
  logger?: LogLevel[] | false;
  /**
   * The service's logger: Nest's lines (its start-up lines at debug), the errors the API answers
   * 500 or 503 (each failure once, then at most every 30 s) and the faults the MCP tools answer
   * as internal errors. Absent: Nest's console logger.
   */
  log?: Logger;
  /** The web app's build served at `/` (default: @neatroots/web's dist/); null serves none (a 503 saying so). */
  appDir?: string | null;
  /** Origins whose pages may call the API from a browser (CORS; `*` for any); default none: no CORS headers. */
  corsOrigins?: readonly string[];
  /** How long close() lets the requests in hand finish before it cuts their connections (default 5000 ms). */
  shutdownGraceMs?: number;
}

@Module({})
export class ApiModule {
  static forRoot(opts: Pick<ApiOptions, 'queries' | 'resolveKey' | 'modelStats' | 'disabledChecks' | 'sop' | 'review' | 'authoring' | 'log'>): DynamicModule {
    return {
      module: ApiModule,
      controllers: [RunsController, FindingsController, ModelsController, DeadLettersController, DisabledChecksController, WorkspacesController, ReviewController, SuggestionsController, GitHubController, LineageController, ChecksController, McpController, HealthController],
      providers: [
        { provide: REVIEW_QUERIES, useValue: opts.queries },
        { provide: MODEL_STATS, useValue: opts.modelStats ?? null },
        { provide: SOP_QUERIES, useValue: opts.sop ?? null },
        { provide: REVIEW_SOP_QUERIES, useValue: opts.review ?? null },
        // The GitHub connection is the review service's (in-process, or over gRPC with the rest).
        { provide: GITHUB_CONNECTIONS, useValue: githubOf(opts.review) },
        { provide: DISABLED_CHECKS, useValue: opts.disabledChecks ?? null },
        { provide: AUTHORING, useValue: opts.authoring ?? null },
        { provide: RESOLVE_KEY, useValue: opts.resolveKey },
        { provide: API_LOG, useValue: opts.log ?? null },
        ApiKeyGuard,
      ],
    };
  }
}

/** Builds the REST API (the neatroots /v1 endpoints) and starts it listening. */
export async function createApi(opts: ApiOptions): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(ApiModule.forRoot(opts), {
    // The service's logger when given (NEATROOTS_LOG_FORMAT, NEATROOTS_LOG_LEVEL): Nest's
    // console logger wrote coloured text lines of its own to standard output.
    logger: opts.logger === false ? false : opts.log ? new NestLog(opts.log) : (opts.logger ?? ['error', 'warn']),
    abortOnError: false,
    // Our own parser, JSON only and with our limit; Nest's default also reads forms.
    bodyParser: false,
  });
  // First: every answer carries them, a CORS preflight's, a refusal's and an error's included.
  securityHeaders(app);
  allowCors(app, opts.corsOrigins ?? []);
  app.use(keyBeforeBody(opts.resolveKey));
  app.use(requireJsonBody);
  app.use(parseBody);
  app.use(bodyParserErrors);
  app.useGlobalFilters(new ErrorsFilter(opts.log));
  serveApp(app, opts.appDir === undefined ? defaultAppDir() : opts.appDir);
  // No enableShutdownHooks(): the entry point closes the services in order (stop accepting,
  // drain, flush, close), the api among them.
  if (opts.host) await app.listen(opts.port, opts.host);
  else await app.listen(opts.port);
  closeGracefully(app, opts.shutdownGraceMs ?? 5_000);
  return app;
}

/**
 * app.close() stops the HTTP port as ingest's OTLP/HTTP port stops: from then on every answer
 * carries `Connection: close` (node closes the connection once it is sent), so a keep-alive
 * client moves on after the answer in hand; idle connections close at once; what is still open
 * after graceMs is cut. Nest's adapter only called node's server.close(), which goes on answering
 * on a connection that had a request in hand for as long as its client keeps sending.
 */
function closeGracefully(app: INestApplication, graceMs: number): void {
  const server = app.getHttpServer() as Server;
  /** Answers in hand, so that those not begun when the close comes are the last on their connection. */
  const inHand = new Set<ServerResponse>();
  let closing = false;
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (closing) {
      res.setHeader('Connection', 'close');
      return;
    }
    inHand.add(res);
    res.once('close', () => inHand.delete(res));
  });
  let closed: Promise<void> | undefined;
  // What app.close() calls once Nest's shutdown hooks ran (the app itself is a proxy that takes
  // no new properties; its adapter is a plain object).
  const adapter = app.getHttpAdapter() as { close(): Promise<void> | undefined };
  adapter.close = () =>
    (closed ??= (() => {
      closing = true;
      for (const res of inHand) if (!res.headersSent) res.setHeader('Connection', 'close');
      return drainHttpServer(server, graceMs);
    })());
}

/**
 * Nest's logger interface over the service's: Nest's `log` and `verbose` lines (routes mapped,
 * the app started) at debug, the others at their level, the Nest context as a field.
 */
export class NestLog implements LoggerService {
  constructor(private readonly to: Logger) {}

  /** The context Nest's Logger passes last, and a stack it passes before it (error). */
  private static parts(params: unknown[]): { context?: string; stack?: string } {
    const strings = params.filter((p): p is string => typeof p === 'string');
    const stack = strings.find((p) => /\n\s+at /.test(p));
    const context = strings.filter((p) => p !== stack).pop();
    return { ...(context ? { context } : {}), ...(stack ? { stack } : {}) };
  }

  private static text(message: unknown): string {
    if (message instanceof Error) return message.message;
    return typeof message === 'string' ? message : JSON.stringify(message);
  }

  log(message: unknown, ...params: unknown[]): void {
    const { context } = NestLog.parts(params);
    this.to.debug(NestLog.text(message), context ? { context } : undefined);
  }

  verbose(message: unknown, ...params: unknown[]): void {
    this.log(message, ...params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.log(message, ...params);
  }

  warn(message: unknown, ...params: unknown[]): void {
    const { context } = NestLog.parts(params);
    this.to.warn(NestLog.text(message), context ? { context } : undefined);
  }

  error(message: unknown, ...params: unknown[]): void {
    const { context, stack } = NestLog.parts(params);
    // Nest logs a failure to listen (EADDRINUSE) and throws it to app.listen's caller, which
    // reports it in its own words (neatroots start: the port and its variable): at debug here.
    if (context === 'NestApplication') return this.log(message, ...params);
    const err = message instanceof Error ? message : stack ? Object.assign(new Error(NestLog.text(message)), { stack }) : undefined;
    this.to.error(NestLog.text(message), err, context ? { context } : undefined);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.error(message, ...params);
  }
}

/** Where a listening app can be reached from this machine (tests, logs). */
export function apiUrl(app: INestApplication): string {
  const addr = app.getHttpServer().address() as AddressInfo;
  return `http://127.0.0.1:${addr.port}`;
}

function githubOf(review: ReviewSopQueries | undefined) {
  if (!review) return null;
  return { put: (ws: string, body: unknown) => review.putRepoConnection(ws, body), get: (ws: string) => review.getRepoConnection(ws), delete: (ws: string) => review.deleteRepoConnection(ws) };
}
