import { credentials, Metadata, Server, ServerCredentials } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import type { AddressInfo } from 'node:net';
import { createApi, ReviewGrpcClient } from '@neatroots/api';
import type { RunWindow } from '@neatroots/checks';
import { startIngest } from '@neatroots/ingest';
import {
  createMetrics,
  HealthService,
  KafkaBus,
  loadModelConfig,
  migrate,
  openPostgres,
  openRedisWindowStore,
  startAdmin,
  type Config,
  type Metrics,
} from '@neatroots/platform';
import type { Bus, Db } from '@neatroots/ports';
import { questionGrpcService, startQuestionService } from '@neatroots/question';
import type { QuestionFindingsWindow, SchedulerWindow } from '@neatroots/questions';
import { reviewGrpcService, startReview } from '@neatroots/review';
import { startRuleEngine } from '@neatroots/rule-engine';
import { makeTopics } from '@neatroots/spans';
import { ProjectsRepo, QuestionsRepo, QuietChecks } from '@neatroots/store';
import { questionScheduler, questionServiceConfig, questionsOf } from './questions';
import { cachedKeyLookup, ingestListen, readProjectsSafe, seedApiKeys, Shutdown, startCheckSet, steeringLookup, type Logger } from './runtime';

export const TARGETS = ['ingest', 'rule-engine', 'question', 'review', 'api', 'all'] as const;
export type Target = (typeof TARGETS)[number];

export interface Served {
  target: Target;
  adminPort: number;
  servicePort: number;
  /** Set for targets that run them. */
  ingestPorts?: { otlp: number; grpc: number };
  httpPort?: number;
  metrics: Metrics;
  health: HealthService;
  close(): Promise<void>;
}

function need(config: Config, name: 'NEATROOTS_KAFKA_BROKERS' | 'NEATROOTS_REDIS_URL' | 'NEATROOTS_PG_URL', target: Target): void {
  const v = config[name];
  if (!v || (Array.isArray(v) && !v.length)) throw new ServeConfigError(`${name} is required for --target ${target}`);
}

export class ServeConfigError extends Error {}

/**
 * The distributed deployment: one service (or all) in this process, on Kafka, Redis and
 * Postgres. Every process serves grpc.health.v1 on its service port and /healthz, /readyz,
 * /metrics on its admin port, and shuts down in order on close(): stop accepting, drain
 * what is in hand, flush, close connections.
 */
export async function serve(target: Target, config: Config, log: Logger): Promise<Served> {
  const wants = (t: Exclude<Target, 'all'>) => target === 'all' || target === t;
  if (wants('ingest') || wants('rule-engine') || wants('review') || wants('question')) need(config, 'NEATROOTS_KAFKA_BROKERS', target);
  if (wants('rule-engine') || wants('question')) need(config, 'NEATROOTS_REDIS_URL', target);
  if (wants('review') || wants('rule-engine') || wants('question')) need(config, 'NEATROOTS_PG_URL', target);
  const models = wants('rule-engine') || wants('question') ? loadModelConfig(process.env) : undefined;

  const metrics = createMetrics(target);
  const health = new HealthService();
  const shutdown = new Shutdown(log);
  const checksReady: (() => Promise<boolean>)[] = [];
  const close = () => {
    health.setAll('NOT_SERVING');
    return shutdown.run();
  };

  try {
    const grpcServer = new Server();
    grpcServer.addService(health.definition().service, health.definition().implementation);

    let bus: Bus | undefined;
    if (wants('ingest') || wants('rule-engine') || wants('review') || wants('question')) {
      const kafka = new KafkaBus({
        brokers: config.NEATROOTS_KAFKA_BROKERS,
        clientId: `neatroots-${target}`,
        partitions: config.NEATROOTS_PARTITIONS,
        sessionTimeout: config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS,
        lingerMs: config.NEATROOTS_KAFKA_LINGER_MS,
        partitionsConsumedConcurrently: config.NEATROOTS_KAFKA_CONCURRENT_PARTITIONS,
        minBytes: config.NEATROOTS_KAFKA_FETCH_MIN_BYTES,
        maxWaitTimeInMs: config.NEATROOTS_KAFKA_FETCH_MAX_WAIT_MS,
        heartbeatInterval: Math.max(500, Math.floor(config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS / 10)),
        rebalanceTimeout: Math.max(10_000, config.NEATROOTS_KAFKA_SESSION_TIMEOUT_MS),
        onError: (err, where) => {
          metrics.dependencyErrors.inc({ dependency: 'kafka' });
          log.error(`kafka ${where.topic}${where.group ? `/${where.group}` : ''}`, err);
        },
        onBatch: (b) => {
          metrics.consumed.inc({ topic: b.topic, group: b.group }, b.records);
          metrics.consumerLag.set({ topic: b.topic, group: b.group }, b.lag);
        },
      });
      // Consumer groups are named after the topic prefix, so two deployments (or test runs)
      // sharing one Kafka never join each other's groups.
      bus = scopedGroups(kafka, config.NEATROOTS_TOPIC_PREFIX);
      shutdown.add(() => kafka.close());
    }
    const topics = makeTopics(config.NEATROOTS_TOPIC_PREFIX);

    let db: Db | undefined;
    if (config.NEATROOTS_PG_URL && (wants('review') || wants('rule-engine') || wants('question'))) {
      const pg = await openPostgres({ url: config.NEATROOTS_PG_URL, max: 10, applicationName: `neatroots-${target}` });
      db = pg;
      shutdown.add(() => pg.close());
      // Migrations are idempotent and serialised by an advisory lock: whichever starts first runs them.
      if (wants('review') || wants('question')) {
        await migrate(pg);
        await seedApiKeys(pg, config.NEATROOTS_API_KEYS, config.NEATROOTS_STEERING);
      }
      checksReady.push(async () => {
        try {
          await pg.query('SELECT 1');
          return true;
        } catch {
          metrics.dependencyErrors.inc({ dependency: 'postgres' });
          return false;
        }
      });
    }

    if (wants('review')) {
      const review = await startReview({ bus: bus!, db: db!, topics, log: (m, err) => log.error(`review: ${m}`, err) });
      shutdown.add(() => review.close());
      const projects = new ProjectsRepo(db!);
      const svc = reviewGrpcService(review.queries, (key) => projects.resolveApiKey(key));
      grpcServer.addService(svc.service, svc.implementation);
      health.set('neatroots.v1.Review', 'SERVING');
    }

    const redisWindows = async <W>(suffix: string) => {
      const store = await openRedisWindowStore<W>({
        url: config.NEATROOTS_REDIS_URL!,
        prefix: `${config.NEATROOTS_TOPIC_PREFIX}${suffix}`,
        onError: (err) => {
          metrics.dependencyErrors.inc({ dependency: 'redis' });
          log.error('redis', err);
        },
      });
      shutdown.add(() => store.close());
      return store;
    };
    const registered = () => readProjectsSafe(config.NEATROOTS_HOME, log);
    const checks = wants('rule-engine') || wants('question') ? await startCheckSet({ home: config.NEATROOTS_HOME, projects: registered, db, log }) : undefined;
    if (checks) shutdown.add(async () => checks.close());

    if (wants('question')) {
      const svc = await startQuestionService({
        bus: bus!,
        topics,
        windows: await redisWindows<QuestionFindingsWindow>(':q'),
        db,
        ...questionServiceConfig(models!),
        questions: (() => {
          const of = questionsOf(checks!.loaded);
          return () => of().questions;
        })(),
        onPlan: () => void checks!.reload().catch((err) => log.error('checks reload after a plan failed', err)),
        quiet: new QuietChecks(db!).lookup,
        log: (m, err) => log.error(`question: ${m}`, err),
      });
      shutdown.add(() => svc.close());
      const q = questionGrpcService(svc.answerer, (m: string, err?: unknown) => log.error(`question grpc: ${m}`, err));
      grpcServer.addService(q.service, q.implementation);
      health.set('neatroots.v1.Question', 'SERVING');
    }

    if (wants('rule-engine')) {
      const windows = await openRedisWindowStore<RunWindow>({
        url: config.NEATROOTS_REDIS_URL!,
        prefix: config.NEATROOTS_TOPIC_PREFIX,
        onError: (err) => {
          metrics.dependencyErrors.inc({ dependency: 'redis' });
          log.error('redis', err);
        },
      });
      shutdown.add(() => windows.close());
      const quiet = new QuietChecks(db!);
      const engine = await startRuleEngine({
        bus: bus!,
        windows,
        rules: checks!.rules,
        topics,
        questions: {
          scheduler: questionScheduler({ windows: await redisWindows<SchedulerWindow>(':qs'), loaded: checks!.loaded, models: models!, plans: new QuestionsRepo(db!) }),
          topic: topics.questions,
        },
        steering: steeringLookup({ projects: registered, env: config.NEATROOTS_STEERING, db }),
        windowTtlAfterEndMs: config.NEATROOTS_WINDOW_TTL_MS,
        quiet: quiet.lookup,
        log: (m, err) => log.error(`rule-engine: ${m}`, err),
      });
      shutdown.add(() => engine.close());
      const rawFindings = () => engine.metrics.findings;
      let lastFindings = 0;
      const sync = setInterval(() => {
        const n = rawFindings();
        if (n > lastFindings) metrics.findings.inc({ status: 'any' }, n - lastFindings);
        lastFindings = n;
      }, 1000);
      sync.unref();
      shutdown.add(async () => clearInterval(sync));
    }

    let ingestPorts: Served['ingestPorts'];
    let reviewClient: ReviewGrpcClient | undefined;
    const reviewClientFor = () => (reviewClient ??= new ReviewGrpcClient(config.NEATROOTS_REVIEW_ADDR));
    if (wants('ingest')) {
      const client = reviewClientFor();
      const resolveKey = cachedKeyLookup((key) => client.resolveKey(key));
      const ingest = await startIngest({
        bus: bus!,
        resolveKey,
        topics,
        ...ingestListen(config),
      });
      shutdown.add(() => ingest.close());
      ingestPorts = { otlp: ingest.otlpPort, grpc: ingest.grpcPort };
      health.set('neatroots.v1.Ingest', 'SERVING');
      health.set('opentelemetry.proto.collector.trace.v1.TraceService', 'SERVING');
      // Ingest's counters, as Prometheus metrics.
      const last = { received: 0, accepted: 0, rejected: {} as Record<string, number> };
      const sync = setInterval(() => {
        const m = ingest.metrics;
        metrics.spansReceived.inc({ source: 'all' }, m.items_received - last.received);
        metrics.spansAccepted.inc({ source: 'all' }, m.items_accepted - last.accepted);
        metrics.published.inc({ topic: topics.events.name }, m.items_accepted - last.accepted);
        for (const [reason, n] of Object.entries(m.items_rejected)) {
          const d = n - (last.rejected[reason] ?? 0);
          if (d > 0) metrics.spansRejected.inc({ source: 'all', reason }, d);
        }
        last.received = m.items_received;
        last.accepted = m.items_accepted;
        last.rejected = { ...m.items_rejected };
      }, 1000);
      sync.unref();
      shutdown.add(async () => clearInterval(sync));
    }

    let httpPort: number | undefined;
    if (wants('api')) {
      const client = reviewClientFor();
      const questionClient = new v1.QuestionClient(config.NEATROOTS_QUESTION_ADDR, credentials.createInsecure());
      shutdown.add(async () => questionClient.close());
      const api = await createApi({
        queries: client,
        resolveKey: (key) => client.resolveKey(key),
        // Agreement per question lives in the question service.
        modelStats: (checkId) =>
          new Promise((resolve, reject) =>
            questionClient.agreement({ check_id: checkId ?? '' }, new Metadata(), { deadline: new Date(Date.now() + 10_000) }, (err, res) =>
              err ? reject(new Error(`question service: ${err.details || err.message}`)) : resolve(res.questions),
            ),
          ),
        port: config.NEATROOTS_HTTP_PORT,
        host: config.NEATROOTS_HOST,
      });
      shutdown.add(() => api.close());
      httpPort = (api.getHttpServer().address() as AddressInfo).port;
    }
    if (reviewClient) shutdown.add(async () => reviewClient?.close());

    const servicePort = await new Promise<number>((resolve, reject) =>
      grpcServer.bindAsync(`${config.NEATROOTS_HOST}:${servicePortOf(target, config)}`, ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
    shutdown.add(
      () =>
        new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            grpcServer.forceShutdown();
            resolve();
          }, 5_000);
          grpcServer.tryShutdown(() => {
            clearTimeout(t);
            resolve();
          });
        }),
    );

    const admin = await startAdmin({
      host: config.NEATROOTS_HOST,
      port: config.NEATROOTS_ADMIN_PORT,
      metrics,
      ready: async () => health.get() === 'SERVING' && (await Promise.all(checksReady.map((c) => c()))).every(Boolean),
    });
    shutdown.addLast(() => admin.close());
    health.set('', 'SERVING');
    return { target, adminPort: admin.port, servicePort, ingestPorts, httpPort, metrics, health, close };
  } catch (err) {
    await close();
    throw err;
  }
}

function scopedGroups(bus: Bus, prefix: string): Bus {
  return {
    publish: (topic, records) => bus.publish(topic, records),
    subscribe: (topic, opts, handler) => bus.subscribe(topic, { ...opts, group: `${prefix}.${opts.group}` }, handler),
    close: () => bus.close(),
  };
}

/** The gRPC port this process binds: the review (or question) service's, else the health-only one. */
function servicePortOf(target: Target, config: Config): number {
  if (target === 'review' || target === 'all') return config.NEATROOTS_REVIEW_PORT;
  if (target === 'question') return config.NEATROOTS_QUESTION_PORT;
  return config.NEATROOTS_SERVICE_PORT;
}
