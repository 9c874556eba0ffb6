/**
 * docker-compose.yml: the whole distributed topology on one machine. No Docker engine is
 * needed: the file is parsed and checked here, and the application's environment goes through the
 * same start-up validation the services run. compose.integration.spec.ts adds Compose's own
 * `docker compose config` check.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as YAML from 'yaml';
import { DEFAULT_MAX_RECORD_BYTES, MAX_RECORD_OVERHEAD, loadModelConfig } from '@neatroots/platform';
import { loadConfig } from '../../libs/platform/src/config';
import { durationMs, interpolate, repoRoot } from './support';

interface Healthcheck {
  test: string[] | string;
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  ports?: string[];
  environment?: Record<string, string | number | boolean | null>;
  depends_on?: Record<string, { condition?: string }>;
  healthcheck?: Healthcheck;
  volumes?: string[];
  container_name?: string;
  stop_grace_period?: string;
}

interface ComposeFile {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const APP = ['ingest', 'rule-engine', 'question', 'review', 'api'] as const;
const BACKING = ['kafka', 'redis', 'postgres'] as const;
const file = path.join(repoRoot, 'docker-compose.yml');

function load(): ComposeFile {
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'), { merge: true });
  if (doc.errors.length) throw new Error(`docker-compose.yml: ${doc.errors.map((e) => e.message).join('; ')}`);
  return doc.toJSON() as ComposeFile;
}

/** A service's environment as the container sees it when the shell sets nothing. */
function containerEnv(s: Service, shell: Record<string, string | undefined> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(s.environment ?? {})) {
    if (v === null) {
      // `NAME:` with no value passes the shell's variable through, and leaves it unset otherwise.
      if (shell[k] !== undefined) out[k] = shell[k] as string;
    } else {
      out[k] = interpolate(String(v), shell);
    }
  }
  return out;
}

function hostPort(address: string): { host: string; port: number } {
  const m = /^([^:/]+):(\d+)$/.exec(address);
  if (!m) throw new Error(`not host:port: ${address}`);
  return { host: m[1], port: Number(m[2]) };
}

const compose = load();
const svc = (name: string): Service => {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

describe('docker-compose.yml', () => {
  it('holds the backing services and one container per neatroots service, nothing else', () => {
    expect(Object.keys(compose.services).sort()).toEqual([...APP, ...BACKING].sort());
    expect(compose.name).toBe('neatroots');
  });

  it('runs every neatroots service from the one image, built once from deploy/docker/Dockerfile', () => {
    const images = new Set(APP.map((n) => svc(n).image));
    expect(images.size).toBe(1);
    expect(interpolate(String([...images][0]), {})).toBe('neatroots:local');
    const builders = APP.filter((n) => svc(n).build);
    expect(builders).toHaveLength(1);
    const build = svc(builders[0]).build!;
    expect(build.context).toBe('.');
    expect(existsSync(path.join(repoRoot, build.context, build.dockerfile))).toBe(true);
    expect(build.dockerfile).toBe('deploy/docker/Dockerfile');
  });

  it.each(APP)('starts %s with `serve --target` of its own name', (name) => {
    expect(svc(name).command).toEqual(['serve', '--target', name]);
  });

  it('publishes OTLP 4317 (gRPC) and 4318 (HTTP) and gRPC 50051 on ingest, 8080 on api, and no other neatroots port', () => {
    expect(svc('ingest').ports?.map(String)).toEqual(['${NEATROOTS_PUBLISH_ADDRESS:-127.0.0.1}:4317:4317', '${NEATROOTS_PUBLISH_ADDRESS:-127.0.0.1}:4318:4318', '${NEATROOTS_PUBLISH_ADDRESS:-127.0.0.1}:50051:50051']);
    expect(svc('api').ports?.map(String)).toEqual(['${NEATROOTS_PUBLISH_ADDRESS:-127.0.0.1}:8080:8080']);
    for (const name of ['rule-engine', 'question', 'review']) expect(svc(name).ports).toBeUndefined();
  });

  it('leaves the rule engine scalable (`--scale rule-engine=N`): no container_name, no host ports', () => {
    const re = svc('rule-engine');
    expect(re.container_name).toBeUndefined();
    expect(re.ports).toBeUndefined();
    for (const s of Object.values(compose.services)) expect(s.container_name).toBeUndefined();
    expect(durationMs(re.stop_grace_period ?? '10s')).toBeGreaterThanOrEqual(30_000);
  });

  it.each(APP)('health-checks %s on the admin /readyz with the script the image carries', (name) => {
    const hc = svc(name).healthcheck!;
    expect(hc.test).toEqual(['CMD', 'node', '/app/deploy/docker/healthcheck.js', '/readyz']);
    expect(existsSync(path.join(repoRoot, 'deploy/docker/healthcheck.js'))).toBe(true);
    // long enough for start-up (migrations, Kafka group join) before the container counts as unhealthy
    const patience = durationMs(hc.start_period ?? '0s') + durationMs(hc.interval ?? '30s') * (hc.retries ?? 3);
    expect(patience).toBeGreaterThanOrEqual(60_000);
    expect(durationMs(hc.timeout ?? '30s')).toBeLessThan(durationMs(hc.interval ?? '30s'));
  });

  it('health-checks the backing services with their own tools', () => {
    expect(svc('postgres').healthcheck?.test).toEqual(['CMD', 'pg_isready', '-U', 'neatroots', '-d', 'neatroots']);
    expect(svc('redis').healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping']);
    expect(String(svc('kafka').healthcheck?.test)).toContain('--bootstrap-server localhost:9092');
  });

  it('waits for health on every dependency, with no cycle', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      for (const [dep, how] of Object.entries(s.depends_on ?? {})) {
        expect({ service: name, dep, condition: how.condition }).toEqual({ service: name, dep, condition: 'service_healthy' });
        expect(compose.services[dep]?.healthcheck).toBeDefined();
      }
    }
    const deps = (n: string) => Object.keys(svc(n).depends_on ?? {});
    // ingest resolves API keys through review: without it every export is 503
    expect(deps('ingest')).toEqual(expect.arrayContaining(['kafka', 'review']));
    // review owns Postgres; the rule engine and question ask it over gRPC, the api asks both
    expect(deps('rule-engine')).toEqual(expect.arrayContaining(['kafka', 'redis', 'question', 'review']));
    expect(deps('question')).toEqual(expect.arrayContaining(['kafka', 'redis', 'review']));
    expect(deps('review')).toEqual(expect.arrayContaining(['postgres', 'kafka']));
    expect(deps('api')).toEqual(expect.arrayContaining(['review', 'question']));
    const visiting = new Set<string>();
    const done = new Set<string>();
    const visit = (n: string, trail: string[]): void => {
      if (done.has(n)) return;
      if (visiting.has(n)) throw new Error(`depends_on cycle: ${[...trail, n].join(' -> ')}`);
      visiting.add(n);
      for (const d of deps(n)) visit(d, [...trail, n]);
      visiting.delete(n);
      done.add(n);
    };
    for (const n of Object.keys(compose.services)) visit(n, []);
  });

  it('runs Kafka as a single-node KRaft broker and controller with replication factor 1 everywhere', () => {
    const env = containerEnv(svc('kafka'));
    expect(svc('kafka').image).toMatch(/^apache\/kafka:4\./);
    expect(env.KAFKA_PROCESS_ROLES.split(',').sort()).toEqual(['broker', 'controller']);
    expect(env.KAFKA_CONTROLLER_QUORUM_VOTERS).toBe(`${env.KAFKA_NODE_ID}@kafka:9093`);
    expect(env.KAFKA_LISTENERS).toContain('CONTROLLER://:9093');
    expect(env.KAFKA_CONTROLLER_LISTENER_NAMES).toBe('CONTROLLER');
    expect(Object.keys(env).filter((k) => /ZOOKEEPER/.test(k))).toEqual([]);
    // 16 bytes, base64url without padding: what `kafka-storage format --cluster-id` accepts
    expect(Buffer.from(env.CLUSTER_ID, 'base64url')).toHaveLength(16);
    expect(env.CLUSTER_ID).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // without these a single broker never gets a group coordinator (kafkajs #1752)
    for (const k of [
      'KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR',
      'KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR',
      'KAFKA_TRANSACTION_STATE_LOG_MIN_ISR',
      'KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR',
      'KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR',
      'KAFKA_DEFAULT_REPLICATION_FACTOR',
      'KAFKA_MIN_INSYNC_REPLICAS',
    ]) expect({ [k]: env[k] }).toEqual({ [k]: '1' });
    // the data survives `docker compose down`
    expect(svc('kafka').volumes).toContain(`kafka-data:${env.KAFKA_LOG_DIRS}`);
  });

  it('lets Kafka take a record as large as the largest span ingest accepts, on any topic', () => {
    const env = containerEnv(svc('kafka'));
    // what the bus publishes at most (a span of NEATROOTS_MAX_ITEM_CHARS characters), with a batch's framing
    const largest = DEFAULT_MAX_RECORD_BYTES + MAX_RECORD_OVERHEAD;
    expect(largest).toBeGreaterThan(1024 * 1024); // past the broker's default message.max.bytes
    expect(Number(env.KAFKA_MESSAGE_MAX_BYTES)).toBeGreaterThanOrEqual(largest);
    // and a follower (a broker added to this one) copies it
    expect(Number(env.KAFKA_REPLICA_FETCH_MAX_BYTES)).toBeGreaterThanOrEqual(Number(env.KAFKA_MESSAGE_MAX_BYTES));
  });

  it('keeps PostgreSQL, Redis and Kafka data in declared named volumes', () => {
    expect(svc('postgres').volumes).toEqual(['postgres-data:/var/lib/postgresql/data']);
    expect(svc('redis').volumes).toEqual(['redis-data:/data']);
    const used = Object.values(compose.services).flatMap((s) => (s.volumes ?? []).map((v) => v.split(':')[0]))
      .filter((v) => !v.startsWith('.') && !v.startsWith('/'));
    expect(Object.keys(compose.volumes ?? {}).sort()).toEqual([...new Set(used)].sort());
  });

  it.each(APP)('gives %s an environment that passes the start-up validation', (name) => {
    const env = containerEnv(svc(name));
    const config = loadConfig(env);
    expect(config.NEATROOTS_HOST).toBe('0.0.0.0');
    expect(config.NEATROOTS_API_KEYS.length).toBeGreaterThan(0);
    // pre-call checks wait for the run's spans to come through Kafka: more than the embedded 50 ms
    expect(config.NEATROOTS_PRECHECK_TIMEOUT_MS).toBe(500);
    expect(loadConfig(containerEnv(svc(name), { NEATROOTS_PRECHECK_TIMEOUT_MS: '800' })).NEATROOTS_PRECHECK_TIMEOUT_MS).toBe(800);
    // and the same with the shell's own settings passed through
    const withShell = containerEnv(svc(name), {
      NEATROOTS_API_KEYS: 'a=k1,b=k2', NEATROOTS_LLM_URL: 'http://host.docker.internal:11434/v1', NEATROOTS_STEERING: 'a',
    });
    expect(loadConfig(withShell).NEATROOTS_API_KEYS).toEqual([{ project: 'a', key: 'k1' }, { project: 'b', key: 'k2' }]);
    expect(withShell.NEATROOTS_LLM_URL).toBe('http://host.docker.internal:11434/v1');
    // unset in the shell means unset in the container, never an empty string that fails validation
    expect(Object.values(env)).not.toContain('');
  });

  it.each(APP)('has %s create topics with NEATROOTS_PARTITIONS (6, or the shell\'s): the broker creates none', (name) => {
    expect(loadConfig(containerEnv(svc(name))).NEATROOTS_PARTITIONS).toBe(6);
    expect(loadConfig(containerEnv(svc(name), { NEATROOTS_PARTITIONS: '12' })).NEATROOTS_PARTITIONS).toBe(12);
  });

  it.each(APP)('passes NEATROOTS_INTERNAL_TOKEN_REQUIRED of the shell or .env to %s (an upgrade from a build before the token); true without it', (name) => {
    expect(loadConfig(containerEnv(svc(name))).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe(true);
    expect(loadConfig(containerEnv(svc(name), { NEATROOTS_INTERNAL_TOKEN_REQUIRED: 'false' })).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe(false);
  });

  it.each(APP)('passes NEATROOTS_REDIS_RING_LISTS of the shell or .env to %s (the rollout before a rollback past 2026-12-04); on without it', (name) => {
    expect(loadConfig(containerEnv(svc(name))).NEATROOTS_REDIS_RING_LISTS).toBe('on');
    expect(loadConfig(containerEnv(svc(name), { NEATROOTS_REDIS_RING_LISTS: 'off' })).NEATROOTS_REDIS_RING_LISTS).toBe('off');
  });

  it.each(APP)('passes NEATROOTS_SECRET_KEY of the shell or .env to %s (GitHub connections are off without it)', (name) => {
    const hex = '5e'.repeat(32);
    expect(loadConfig(containerEnv(svc(name), { NEATROOTS_SECRET_KEY: hex })).NEATROOTS_SECRET_KEY?.toString('hex')).toBe(hex);
  });

  it.each(APP)('passes the model endpoints of the shell or .env to %s whole, each with its model (docs/deployment.md)', (name) => {
    const shell = {
      NEATROOTS_DECISION_MODEL_URL: 'https://decisions.example.com/v1', NEATROOTS_DECISION_MODEL_NAME: 'jev-1', NEATROOTS_DECISION_MODEL_KEY: 'dk',
      NEATROOTS_REASONING_MODEL_URL: 'http://host.docker.internal:8000/v1', NEATROOTS_REASONING_MODEL_NAME: 'qwq-32b', NEATROOTS_REASONING_MODEL_KEY: 'rk',
      NEATROOTS_LLM_URL: 'http://host.docker.internal:11434/v1', NEATROOTS_LLM_MODEL: 'llama3.1:8b', NEATROOTS_LLM_KEY: 'lk',
    };
    const env = containerEnv(svc(name), shell);
    // every service validates the model settings at start-up: a URL without its model stops it
    expect(() => loadConfig(env)).not.toThrow();
    const models = loadModelConfig(env);
    expect(models.decision).toMatchObject({ url: shell.NEATROOTS_DECISION_MODEL_URL, model: 'jev-1', key: 'dk' });
    expect(models.reasoning).toMatchObject({ url: shell.NEATROOTS_REASONING_MODEL_URL, model: 'qwq-32b', key: 'rk' });
    expect(models.local).toMatchObject({ url: shell.NEATROOTS_LLM_URL, model: 'llama3.1:8b', key: 'lk' });
  });

  it('passes the retention settings of the shell or .env to review, which runs the retention job; the defaults without them', () => {
    const review = (shell: Record<string, string> = {}) => {
      const c = loadConfig(containerEnv(svc('review'), shell));
      return [c.NEATROOTS_SPAN_RETENTION_DAYS, c.NEATROOTS_TRANSCRIPT_RETENTION_DAYS, c.NEATROOTS_RETENTION_CRON];
    };
    expect(review()).toEqual([30, 0, '23 * * * *']);
    expect(review({ NEATROOTS_SPAN_RETENTION_DAYS: '7', NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '90', NEATROOTS_RETENTION_CRON: '5 2 * * *' })).toEqual([7, 90, '5 2 * * *']);
    // Set but blank in .env (NEATROOTS_SPAN_RETENTION_DAYS=): the default, not 0 (spans kept for good).
    expect(review({ NEATROOTS_SPAN_RETENTION_DAYS: '', NEATROOTS_TRANSCRIPT_RETENTION_DAYS: ' ' })).toEqual([30, 0, '23 * * * *']);
  });

  it('gives the database address and password to review alone, the one service that uses Postgres', () => {
    const having = Object.entries(compose.services).filter(([, s]) => containerEnv(s).NEATROOTS_PG_URL !== undefined).map(([name]) => name);
    expect(having).toEqual(['review']);
  });

  it('wires every address to a service of this file, on the port that service listens on', () => {
    const env = containerEnv(svc('ingest'));
    const kafka = containerEnv(svc('kafka'));
    for (const b of env.NEATROOTS_KAFKA_BROKERS.split(',')) {
      expect(kafka.KAFKA_ADVERTISED_LISTENERS).toContain(`PLAINTEXT://${b}`);
    }
    const redis = new URL(env.NEATROOTS_REDIS_URL);
    expect([redis.protocol, redis.hostname, redis.port]).toEqual(['redis:', 'redis', '6379']);
    const pg = new URL(containerEnv(svc('review')).NEATROOTS_PG_URL);
    const pgEnv = containerEnv(svc('postgres'));
    expect([pg.protocol, pg.hostname, pg.port]).toEqual(['postgres:', 'postgres', '5432']);
    expect([decodeURIComponent(pg.username), decodeURIComponent(pg.password), pg.pathname])
      .toEqual([pgEnv.POSTGRES_USER, pgEnv.POSTGRES_PASSWORD, `/${pgEnv.POSTGRES_DB}`]);
    // one password setting feeds both sides
    const pgShell = new URL(containerEnv(svc('review'), { NEATROOTS_PG_PASSWORD: 'p' }).NEATROOTS_PG_URL);
    expect([pgShell.password, containerEnv(svc('postgres'), { NEATROOTS_PG_PASSWORD: 'p' }).POSTGRES_PASSWORD]).toEqual(['p', 'p']);
    for (const [addr, port, target] of [
      ['NEATROOTS_QUESTION_ADDR', 'NEATROOTS_QUESTION_PORT', 'question'],
      ['NEATROOTS_REVIEW_ADDR', 'NEATROOTS_REVIEW_PORT', 'review'],
      // ingest forwards pre-call checks to the rule engine's service port
      ['NEATROOTS_RULE_ENGINE_ADDR', 'NEATROOTS_SERVICE_PORT', 'rule-engine'],
    ] as const) {
      const a = hostPort(env[addr]);
      expect(a.host).toBe(target);
      expect(String(a.port)).toBe(containerEnv(svc(target))[port]);
    }
    // published container ports are the ones the services are told to listen on
    expect(containerEnv(svc('ingest')).NEATROOTS_OTLP_PORT).toBe('4317');
    expect(containerEnv(svc('ingest')).NEATROOTS_OTLP_HTTP_PORT).toBe('4318');
    expect(containerEnv(svc('ingest')).NEATROOTS_GRPC_PORT).toBe('50051');
    expect(containerEnv(svc('api')).NEATROOTS_HTTP_PORT).toBe('8080');
  });
});
