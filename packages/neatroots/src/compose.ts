import { credentials, Metadata, status, type ClientOptions } from '@grpc/grpc-js';
import { BODY_RULES, ReviewGrpcClient, SopGrpcClient, apiModule, unavailable } from '@neatroots/api';
import type { ProjectEntry } from '@neatroots/checks';
import { ingestModule } from '@neatroots/ingest';
import { createMetrics, GitHubCodeHost, internalClientOptions, InternalTokenWatch, secretKeyOf, startServices, type Config, type LinkFactory, type Metrics, type ModelConfig, type Services } from '@neatroots/platform';
import type { ChatMessage, Logger, Platform, ServiceModule } from '@neatroots/ports';
import { v1 } from '@neatroots/proto';
import { chatDeadlineMs, QuestionDecisionsClient, questionModule, type ModelTimeouts, type QuestionLink } from '@neatroots/question';
import { draftCheck, NoModelError, type AnsweredBy } from '@neatroots/questions';
import { ReviewDataClient, reviewModule, type ReviewLink } from '@neatroots/review';
import { RuleEngineClient, ruleEngineModule } from '@neatroots/rule-engine';
import { QuietChecks } from '@neatroots/store';
import { createAuthoring } from './authoring';
import { localLlmStandsIn, questionServiceConfig } from './questions';
import { ingestListen, readProjectsSafe, startCheckSet, steeringLookup, type CheckSet } from './runtime';

/**
 * The one composition root: which service modules a process runs, and the links the root
 * supplies them (the checks in effect, steering, the models; in the distributed deployment,
 * gRPC clients of the services that run elsewhere). `neatroots start`, `serve --target X` and
 * the tests all come through startNeatroots; only the platform and the targets differ.
 */
export const SERVICES = ['ingest', 'rule-engine', 'question', 'review', 'api'] as const;
export type ServiceName = (typeof SERVICES)[number];

const MODULES: Record<ServiceName, ServiceModule<Config>> = {
  review: reviewModule,
  question: questionModule,
  'rule-engine': ruleEngineModule,
  ingest: ingestModule(ingestListen),
  api: apiModule,
};

/**
 * The largest request review's gRPC port takes (the others keep grpc-js's default, 4 MiB: it is
 * read whole before the internal token is checked, so every byte of the bound is memory a caller
 * without the token can make a service hold). What the api sends there is bounded by its own
 * body limits (services/api/src/body.ts, BODY_RULES): a whole head (PUT /v1/workspaces/{w}/head)
 * of up to 16 MiB of JSON and a session (POST /v1/workspaces/{w}/sessions) of up to 8 MiB, over
 * 4 MiB both. Re-encoded as protobuf they are no larger than their JSON; 4 MiB more hold the
 * call's other fields and framing: 20 MiB.
 */
export const REVIEW_GRPC_REQUEST_BYTES = Math.max(...BODY_RULES.map((r) => r.limit)) + 4 * 1024 * 1024;

/** The largest request the gRPC port of a process running these services takes (undefined: grpc-js's default, 4 MiB). */
export function grpcRequestBytesOf(services: readonly ServiceName[]): number | undefined {
  return services.includes('review') ? REVIEW_GRPC_REQUEST_BYTES : undefined;
}

export interface NeatrootsOptions {
  platform: Platform;
  services: readonly ServiceName[];
  config: Config;
  /** The model endpoints (loadModelConfig); none configured: the built-in fast classifier answers. */
  models: ModelConfig;
  log: Logger;
  /** Projects registered besides the home folder's registry (the demo). */
  projects?: ProjectEntry[];
  /** Watch the check folders and reload on change (default true). */
  watch?: boolean;
  /** Serve the modules' gRPC services on this port (the distributed deployment). */
  grpcPort?: number;
  /** The process's metrics, when the platform reports into them too. */
  metrics?: Metrics;
}

/** The modules of these services. */
export function modulesOf(services: readonly ServiceName[]): ServiceModule<Config>[] {
  return services.map((s) => MODULES[s]);
}

export async function startNeatroots(opts: NeatrootsOptions): Promise<Services> {
  const { config, log } = opts;
  return startServices({
    platform: opts.platform,
    modules: modulesOf(opts.services),
    config,
    log,
    metrics: opts.metrics ?? createMetrics(opts.services.length === SERVICES.length ? 'all' : opts.services.join('+')),
    links: rootLinks(opts),
    grpc: opts.grpcPort !== undefined ? { host: config.NEATROOTS_HOST, port: opts.grpcPort, requestBytes: grpcRequestBytesOf(opts.services) } : undefined,
    admin: { host: config.NEATROOTS_HOST, port: config.NEATROOTS_ADMIN_PORT },
  });
}

function rootLinks(opts: NeatrootsOptions): Record<string, LinkFactory> {
  const { config, log } = opts;
  const registered = (): ProjectEntry[] => [...readProjectsSafe(config.NEATROOTS_HOME, log), ...(opts.projects ?? [])];
  const links: Record<string, LinkFactory> = {
    checks: async ({ link, onClose }) => {
      const review = await link<ReviewLink>('review');
      const checks: CheckSet = await startCheckSet({
        home: config.NEATROOTS_HOME,
        projects: registered,
        database: () => review.data.checks(),
        log: log.child({ service: 'checks' }),
        watch: opts.watch,
      });
      onClose(() => checks.close());
      return checks;
    },
    steering: async ({ link }) => {
      const review = await link<ReviewLink>('review');
      return steeringLookup({ projects: registered, database: (p) => review.data.steering(p) });
    },
    // GitHub connections: the key their tokens are sealed with (distributed: NEATROOTS_SECRET_KEY,
    // the same on every replica; a key file per replica would leave tokens unreadable elsewhere),
    // and the adapter for one.
    github: () => ({
      secretKey: () => secretKeyFor(opts.platform.kind, config),
      hostFor: (c: { token: string; api_url: string }) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url }),
      apiUrls: config.NEATROOTS_GITHUB_API_URLS.length ? config.NEATROOTS_GITHUB_API_URLS : 'public',
    }),
    models: () => ({ localLlmStandsIn: localLlmStandsIn(opts.models), question: questionServiceConfig(opts.models), sop: opts.models.sop }),
    // Checks written by people and coding agents (the api's checks endpoints and MCP tools).
    authoring: async ({ link }) => {
      const [review, question, checks, steering] = await Promise.all([
        link<ReviewLink>('review'),
        link<Partial<QuestionLink>>('question'),
        link<CheckSet>('checks'),
        link<(project: string) => Promise<boolean>>('steering'),
      ]);
      return createAuthoring({ data: review.data, queries: review.queries, checks, draft: question.draft, models: opts.models, steering, maxAgentChecks: config.NEATROOTS_MAX_AGENT_CHECKS });
    },
  };
  if (opts.platform.kind === 'distributed') {
    // Every call to another service's port carries the deployment's internal token, when set.
    const internal = internalClientOptions(config.NEATROOTS_INTERNAL_TOKEN);
    // A process whose calls review refuses for the token (another NEATROOTS_INTERNAL_TOKEN, or
    // none) can do nothing: it is not ready, saying so, until review takes them.
    links.review = ({ onClose, onReady }) => {
      const address = config.NEATROOTS_REVIEW_ADDR;
      // The probe before any traffic: a key no one has, one indexed lookup in review's database.
      const watch = new InternalTokenWatch({ service: 'review', address, probe: () => review.resolveKey('') });
      const review = reviewRemote(address, onClose, internalClientOptions(config.NEATROOTS_INTERNAL_TOKEN, watch));
      onReady(() => watch.ready());
      return review;
    };
    links.question = ({ onClose }) => questionRemote(config.NEATROOTS_QUESTION_ADDR, onClose, internal, opts.models);
    // Ingest forwards the SDK's pre-call checks to the rule engine's process.
    links['rule-engine'] = ({ onClose }) => {
      const client = new RuleEngineClient(config.NEATROOTS_RULE_ENGINE_ADDR, internal);
      onClose(() => client.close());
      return client;
    };
  }
  return links;
}

/** Embedded: the key file (made once; a damaged one throws, naming it). Distributed: NEATROOTS_SECRET_KEY, or none. */
function secretKeyFor(kind: Platform['kind'], config: Config): Buffer | undefined {
  if (kind !== 'distributed') return secretKeyOf(config);
  return config.NEATROOTS_SECRET_KEY;
}

/** The review service in another process, over gRPC; quiet checks cached as in-process. */
function reviewRemote(address: string, onClose: (step: () => unknown) => void, clientOptions: ClientOptions = {}): ReviewLink {
  const queries = new ReviewGrpcClient(address, undefined, clientOptions);
  const data = new ReviewDataClient(address, undefined, clientOptions);
  const sop = new SopGrpcClient(address, undefined, clientOptions);
  onClose(() => queries.close());
  onClose(() => data.close());
  onClose(() => sop.close());
  return { queries, resolveKey: (key) => queries.resolveKey(key), isQuiet: new QuietChecks((p) => data.quietChecks(p)).lookup, data, sop, reviewSop: sop };
}

/**
 * The question service in another process: what the api (and review's checker) asks of it. The
 * deadlines of decisions and drafts come from `models`, this process's model configuration
 * (the same variables as the question service's): the model's timeout, retries and queueing.
 * A call it refuses for NEATROOTS_INTERNAL_TOKEN fails with the api's UnavailableError (503,
 * naming the question service and the mismatch), as a review call so refused does; so does a
 * model agreement the service cannot answer now (away, too slow).
 */
export function questionRemote(
  address: string,
  onClose: (step: () => unknown) => void,
  clientOptions: ClientOptions = {},
  models: ModelTimeouts = { batch: { retries: 2 } },
): Pick<QuestionLink, 'modelStats' | 'decisions' | 'draft'> {
  const client = new v1.QuestionClient(address, credentials.createInsecure(), clientOptions);
  const decisions = new QuestionDecisionsClient(address, { client: clientOptions, models });
  onClose(() => client.close());
  onClose(() => decisions.close());
  // A draft's model call goes through the question service's gateway (Complete), its queue
  // and back-pressure; the draft is read and validated here.
  const chat = (messages: ChatMessage[]) =>
    new Promise<{ text: string; answered_by: AnsweredBy }>((resolve, reject) =>
      client.complete({ messages, priority: '', json: true, max_tokens: 800 }, new Metadata(), { deadline: new Date(Date.now() + chatDeadlineMs(models)) }, (err, res) =>
        err
          ? reject(
              err.code === status.FAILED_PRECONDITION
                ? new NoModelError()
                : // the other failures are the draft's to word (authoring's draftFailure reads the cause)
                  (err.code === status.UNAUTHENTICATED && unavailable(err, 'question')) || new Error(`question service: ${err.details || err.message}`, { cause: err }),
            )
          : resolve({ text: res.text, answered_by: res.answered_by as AnsweredBy }),
      ),
    );
  return {
    draft: (req) => draftCheck(req, chat),
    decisions,
    modelStats: (project, checkId) =>
      new Promise((resolve, reject) =>
        client.agreement({ check_id: checkId ?? '', project }, new Metadata(), { deadline: new Date(Date.now() + 10_000) }, (err, res) =>
          err ? reject(unavailable(err, 'question') ?? new Error(`question service: ${err.details || err.message}`)) : resolve(res.questions),
        ),
      ),
  };
}
