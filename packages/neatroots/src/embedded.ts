import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { createApi } from '@neatroots/api';
import type { LoadResult, ProjectEntry, RunWindow } from '@neatroots/checks';
import { startIngest, type IngestHandle } from '@neatroots/ingest';
import { loadConfig, loadModelConfig, MemoryBus, MemoryWindowStore, migrate, openPgliteWorker, type Config, type ModelConfig } from '@neatroots/platform';
import type { Bus, Db } from '@neatroots/ports';
import { startQuestionService, type QuestionService } from '@neatroots/question';
import type { QuestionFindingsWindow, SchedulerWindow } from '@neatroots/questions';
import { startReview, type Review } from '@neatroots/review';
import { startRuleEngine, type RuleEngineService } from '@neatroots/rule-engine';
import { makeTopics, type Topics } from '@neatroots/spans';
import { ProjectsRepo, QuestionsRepo } from '@neatroots/store';
import { questionScheduler, questionServiceConfig, questionsOf } from './questions';
import { cachedKeyLookup, ingestListen, consoleLogger, readProjectsSafe, seedApiKeys, Shutdown, startCheckSet, steeringLookup, type Logger } from './runtime';

/** The demo project: its own checks (one halt rule) and steering on. */
export const DEMO_PROJECT = 'demo';
export const DEMO_DIR = path.resolve(__dirname, '..', 'demo');

export interface EmbeddedOptions {
  config: Config;
  /** The model endpoints (loadModelConfig); none configured: the built-in fast classifier answers. */
  models?: ModelConfig;
  log?: Logger;
  /** Serve the demo project (its checks, steering on, an API key written to the data folder). */
  demo?: boolean;
  /** PGlite in memory instead of the data folder (tests). */
  inMemoryDb?: boolean;
  /** Watch the check folders and reload on change (default true). */
  watch?: boolean;
}

export interface EmbeddedApp {
  config: Config;
  db: Db;
  bus: Bus;
  topics: Topics;
  ingest: IngestHandle;
  review: Review;
  ruleEngine: RuleEngineService;
  questions: QuestionService;
  httpPort: number;
  /** The demo project's API key, when the demo is on. */
  demoKey?: string;
  checks(): LoadResult;
  /** Reads every check source again (what the watcher does on a change). */
  reloadChecks(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Everything in one process (the embedded default): the in-process bus in place of Kafka,
 * in-memory run windows in place of Redis, PGlite (the same migrations) in place of a
 * Postgres server, and the same service modules the distributed deployment runs apart.
 * Returns the running app; `neatroots start` and the end-to-end tests boot it the same way.
 */
export async function startEmbedded(opts: EmbeddedOptions): Promise<EmbeddedApp> {
  const { config } = opts;
  const log = opts.log ?? consoleLogger;
  const shutdown = new Shutdown(log);
  const close = () => shutdown.run();
  try {
    if (!opts.inMemoryDb) fs.mkdirSync(config.dataDir, { recursive: true });
    // The database on its own thread: storing spans must not slow down checking them.
    const db = await openPgliteWorker(opts.inMemoryDb ? {} : { dataDir: path.join(config.dataDir, 'pg') });
    shutdown.add(() => db.close());
    await migrate(db);

    const projects = new ProjectsRepo(db);
    await seedApiKeys(db, config.NEATROOTS_API_KEYS, config.NEATROOTS_STEERING);
    let demoKey: string | undefined;
    if (opts.demo) {
      demoKey = await demoApiKey(config, projects);
      await projects.setSteering(DEMO_PROJECT, true);
    }

    const bus = new MemoryBus({ onError: (err, topic, group) => log.error(`bus ${topic}/${group}: batch failed, retrying`, err) });
    shutdown.add(() => bus.close());
    const topics = makeTopics(config.NEATROOTS_TOPIC_PREFIX);

    const registered = (): ProjectEntry[] => [
      ...readProjectsSafe(config.NEATROOTS_HOME, log),
      ...(opts.demo ? [{ name: DEMO_PROJECT, path: DEMO_DIR, steering: true }] : []),
    ];
    const checks = await startCheckSet({ home: config.NEATROOTS_HOME, projects: registered, db, log, watch: opts.watch });
    shutdown.add(async () => checks.close());
    const steering = steeringLookup({ projects: registered, env: config.NEATROOTS_STEERING, db });

    const review = await startReview({ bus, db, topics, log: (m, err) => log.error(`review: ${m}`, err) });
    shutdown.add(() => review.close());

    // Question checks: the rule engine's scheduler says which are due; the question service
    // (every model call goes through it) answers them and raises their findings.
    const models = opts.models ?? loadModelConfig({});
    const questions = await startQuestionService({
      bus,
      topics,
      windows: new MemoryWindowStore<QuestionFindingsWindow>(),
      db,
      ...questionServiceConfig(models),
      questions: (() => {
        const of = questionsOf(checks.loaded);
        return () => of().questions;
      })(),
      onPlan: () => void checks.reload().catch((err) => log.error('checks reload after a plan failed', err)),
      quiet: review.isQuiet,
      log: (m, err) => log.error(`question: ${m}`, err),
    });
    shutdown.add(() => questions.close());

    const windows = new MemoryWindowStore<RunWindow>();
    const ruleEngine = await startRuleEngine({
      questions: {
        scheduler: questionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), loaded: checks.loaded, models, plans: new QuestionsRepo(db) }),
        topic: topics.questions,
      },
      bus,
      windows,
      rules: checks.rules,
      topics,
      steering,
      windowTtlAfterEndMs: config.NEATROOTS_WINDOW_TTL_MS,
      quiet: review.isQuiet,
      log: (m, err) => log.error(`rule-engine: ${m}`, err),
    });
    shutdown.add(() => ruleEngine.close());
    // On shutdown, once ingest stopped accepting: let what it accepted be checked and stored.
    shutdown.add(() => Promise.race([bus.idle(), new Promise<void>((r) => setTimeout(r, 10_000).unref())]));

    const resolveKey = cachedKeyLookup((key) => projects.resolveApiKey(key));
    const ingest = await startIngest({
      bus,
      resolveKey,
      topics,
      ...ingestListen(config),
    });
    shutdown.add(() => ingest.close());

    const api = await createApi({
      queries: review.queries,
      resolveKey: async (key) => (await resolveKey(key)) ?? null,
      modelStats: async (checkId) =>
        (await questions.answerer.agreement.stats(checkId)).map((s) => ({ ...s, trained: questions.answerer.classifier.trainedByKey(s.question_key) })),
      port: config.NEATROOTS_HTTP_PORT,
      host: config.NEATROOTS_HOST,
    });
    shutdown.add(() => api.close());

    return {
      config,
      db,
      bus,
      topics,
      ingest,
      review,
      ruleEngine,
      questions,
      httpPort: (api.getHttpServer().address() as AddressInfo).port,
      demoKey,
      checks: checks.loaded,
      reloadChecks: checks.reload,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The demo project's key: made once, kept (0600) in the data folder so a restart reuses it. */
async function demoApiKey(config: Config, projects: ProjectsRepo): Promise<string> {
  const file = path.join(config.dataDir, 'demo-api-key');
  let key: string | undefined;
  try {
    key = fs.readFileSync(file, 'utf8').trim();
  } catch {
    key = undefined;
  }
  if (key && (await projects.resolveApiKey(key)) === DEMO_PROJECT) return key;
  key = (await projects.createApiKey(DEMO_PROJECT, 'demo')).key;
  fs.mkdirSync(config.dataDir, { recursive: true });
  fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

export { loadConfig, consoleLogger, type Logger };
