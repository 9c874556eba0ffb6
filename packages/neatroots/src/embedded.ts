import * as fs from 'node:fs';
import * as path from 'node:path';
import type { LoadResult } from '@neatroots/checks';
import type { IngestHandle } from '@neatroots/ingest';
import { createLogger, embeddedPlatform, loadConfig, loadModelConfig, type Config, type EmbeddedBus, type ModelConfig } from '@neatroots/platform';
import type { Db, Logger, WindowStore } from '@neatroots/ports';
import type { QuestionLink } from '@neatroots/question';
import type { ReviewLink } from '@neatroots/review';
import type { RuleEngineService } from '@neatroots/rule-engine';
import { makeTopics, type Topics } from '@neatroots/messages';
import { ProjectsRepo, type ApiKeyScope } from '@neatroots/store';
import { SERVICES, startNeatroots } from './compose';
import type { CheckSet } from './runtime';

/** The demo project: its own checks (one halt rule) and steering on. */
export const DEMO_PROJECT = 'demo';
export const DEMO_DIR = path.resolve(__dirname, '..', 'demo');

export interface EmbeddedOptions {
  config: Config;
  /** The model endpoints (loadModelConfig); none configured: the built-in fast classifier answers. */
  models?: ModelConfig;
  /** Default: the configured level and format, on standard error. */
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
  bus: EmbeddedBus;
  /** A run-window store of the app by name ('' the rule engine's, ':qs' its question scheduler's): the one its services use. */
  windows<W>(name: string): Promise<WindowStore<W>>;
  topics: Topics;
  ingest: Pick<IngestHandle, 'otlpPort' | 'grpcPort' | 'otlpHttpPort' | 'metrics'>;
  review: ReviewLink;
  ruleEngine: RuleEngineService;
  questions: QuestionLink['service'];
  httpPort: number;
  /** /healthz, /readyz and /metrics. */
  adminPort: number;
  /** The demo project's full API key (the API, the web app, MCP), when the demo is on. */
  demoKey?: string;
  /** The demo project's ingest key (spans, notes and halts only), the one the sample fleet sends with, when the demo is on. */
  demoAgentKey?: string;
  checks(): LoadResult;
  /** Reads every check source again (what the watcher does on a change). */
  reloadChecks(): Promise<void>;
  /** Check files and database checks parsed, and rules compiled, by the check set's loads so far. */
  checkWork(): { parses: number; compiled_rules: number };
  /** Resolves with the reason once a part of the app stopped for good (a disk error); never otherwise. */
  failed: Promise<string>;
  close(): Promise<void>;
}

/**
 * Everything in one process (the embedded default): every service module on the embedded
 * platform (the in-process bus, journaled windows, PGlite). `neatroots start` and the
 * end-to-end tests boot it the same way; `serve --target all` is the same modules on Kafka,
 * Redis and Postgres.
 */
export async function startEmbedded(opts: EmbeddedOptions): Promise<EmbeddedApp> {
  const { config } = opts;
  const log = opts.log ?? createLogger({ level: config.NEATROOTS_LOG_LEVEL, format: config.NEATROOTS_LOG_FORMAT });
  const topics = makeTopics(config.NEATROOTS_TOPIC_PREFIX);
  const platform = embeddedPlatform({ config, log, inMemoryDb: opts.inMemoryDb, drainTopic: topics.events.name });
  let demoKey: string | undefined;
  let demoAgentKey: string | undefined;
  try {
    if (opts.demo) {
      const projects = new ProjectsRepo(await platform.db());
      demoKey = await demoApiKey(config, projects, 'api');
      demoAgentKey = await demoApiKey(config, projects, 'ingest');
      await projects.setSteering(DEMO_PROJECT, true, 'demo');
    }
  } catch (err) {
    await platform.close();
    throw err;
  }
  const services = await startNeatroots({
    platform,
    services: SERVICES,
    config,
    models: opts.models ?? loadModelConfig({}),
    log,
    projects: opts.demo ? [{ name: DEMO_PROJECT, path: DEMO_DIR, steering: true }] : [],
    watch: opts.watch,
  });
  const [review, question, ruleEngine, ingest, checks] = await Promise.all([
    services.link<ReviewLink>('review'),
    services.link<QuestionLink>('question'),
    services.link<RuleEngineService>('rule-engine'),
    services.link<IngestHandle>('ingest'),
    services.link<CheckSet>('checks'),
  ]);
  return {
    config,
    db: await platform.db(),
    bus: platform.bus(),
    windows: <W>(name: string) => platform.windows<W>(name),
    topics,
    ingest,
    review,
    ruleEngine,
    questions: question.service,
    httpPort: services.ports.http,
    adminPort: services.adminPort!,
    demoKey,
    demoAgentKey,
    checks: checks.loaded,
    reloadChecks: checks.reload,
    checkWork: checks.work,
    failed: services.failed,
    close: services.close,
  };
}

/**
 * A demo project's key: made once, kept (0600) in the data folder so a restart reuses it. The
 * full one (demo-api-key) is printed for the API and the web app; the sample fleet sends with
 * the ingest one (demo-agent-key), as agents should.
 */
async function demoApiKey(config: Config, projects: ProjectsRepo, scope: ApiKeyScope): Promise<string> {
  const file = path.join(config.dataDir, scope === 'api' ? 'demo-api-key' : 'demo-agent-key');
  let key: string | undefined;
  try {
    key = fs.readFileSync(file, 'utf8').trim();
  } catch {
    key = undefined;
  }
  const grant = key ? await projects.resolveApiKey(key) : null;
  if (!key || grant?.project !== DEMO_PROJECT || grant.scope !== scope) {
    key = (await projects.createApiKey(DEMO_PROJECT, scope === 'api' ? 'demo' : 'demo-agents', scope)).key;
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
  }
  return key;
}

export { loadConfig, type Logger };
