import {
  ConfigError,
  createMetrics,
  distributedPlatform,
  DRIVER_VARIABLES,
  loadConfig,
  loadModelConfig,
  MissingDriverError,
  PostgresVersionError,
  type Config,
  type Metrics,
  type ModelConfig,
} from '@neatroots/platform';
import type { Logger } from '@neatroots/ports';
import type { Io } from './cli';
import { modulesOf, SERVICES, startNeatroots, type ServiceName } from './compose';
import { cliLogger, logCrashes, untilSignal } from './runtime';

export const TARGETS = [...SERVICES, 'all'] as const;
export type Target = (typeof TARGETS)[number];

export interface Served {
  target: Target;
  adminPort: number;
  servicePort: number;
  /** Set for targets that run them. */
  ingestPorts?: { otlp: number; grpc: number; otlpHttp?: number };
  httpPort?: number;
  metrics: Metrics;
  close(): Promise<void>;
}

export class ServeConfigError extends Error {}

export interface ServeOptions {
  /** The oldest Postgres review starts on, as server_version_num (default 14; tests ask for a newer one). */
  minPostgresVersion?: number;
}

/**
 * The distributed deployment: one service (or all) in this process, on Kafka, Redis and
 * Postgres, wired by the same composition root as the embedded default. Every process serves
 * grpc.health.v1 on its service port and /healthz, /readyz, /metrics on its admin port, and
 * shuts down in order on close(): stop accepting, drain what is in hand, flush, close
 * connections.
 */
export async function serve(target: Target, config: Config, models: ModelConfig, log: Logger, opts: ServeOptions = {}): Promise<Served> {
  const services: readonly ServiceName[] = target === 'all' ? SERVICES : [target];
  // What the services here need, named before anything starts (each module lists its drivers).
  for (const m of modulesOf(services)) {
    for (const need of m.needs) {
      const variable = DRIVER_VARIABLES[need as keyof typeof DRIVER_VARIABLES];
      const v = variable && config[variable];
      if (variable && (!v || (Array.isArray(v) && !v.length))) throw new ServeConfigError(`${variable} is required for --target ${target} (by ${m.name})`);
    }
  }
  const metrics = createMetrics(target);
  const platform = distributedPlatform({ config, log, metrics, name: target, minPostgresVersion: opts.minPostgresVersion });
  const running = await startNeatroots({ platform, services, config, models, log, metrics, grpcPort: servicePortOf(target, config) }).catch((e: unknown) => {
    // A driver a service asked for without listing it in its needs: the same stop (exit 2), not a stack trace.
    if (e instanceof MissingDriverError) throw new ServeConfigError(`${e.variable} is required for --target ${target}`);
    // A Postgres too old for the store: the same stop, naming the version found and the one needed.
    if (e instanceof PostgresVersionError) throw new ServeConfigError(e.message);
    throw e;
  });
  const { otlp, grpc, http, otlpHttp } = running.ports;
  return {
    target,
    adminPort: running.adminPort!,
    servicePort: running.servicePort!,
    ...(otlp !== undefined ? { ingestPorts: { otlp, grpc, otlpHttp } } : {}),
    ...(http !== undefined ? { httpPort: http } : {}),
    metrics,
    close: running.close,
  };
}

/** The gRPC port this process binds: the review (or question) service's, else the health-only one. */
function servicePortOf(target: Target, config: Config): number {
  if (target === 'review' || target === 'all') return config.NEATROOTS_REVIEW_PORT;
  if (target === 'question') return config.NEATROOTS_QUESTION_PORT;
  return config.NEATROOTS_SERVICE_PORT;
}

/** `neatroots serve --target X`: one service (or all) until SIGINT or SIGTERM. */
export async function runServe(target: Target, io: Io): Promise<number> {
  let config: Config;
  let models: ModelConfig;
  try {
    config = loadConfig(io.env);
    models = loadModelConfig(io.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      io.err(`neatroots serve: ${e.message}`);
      return 2;
    }
    throw e;
  }
  const log = cliLogger(config, io);
  logCrashes(log);
  let served: Served;
  try {
    served = await serve(target, config, models, log);
  } catch (e) {
    if (e instanceof ServeConfigError) {
      io.err(`neatroots serve: ${e.message}`);
      return 2;
    }
    throw e;
  }
  // Listened for before it says so (see start.ts).
  const stop = untilSignal(log);
  log.info(
    `serving (health: gRPC :${served.servicePort}, admin http :${served.adminPort})` +
      (served.ingestPorts ? `; OTLP :${served.ingestPorts.otlp}, OTLP/HTTP :${served.ingestPorts.otlpHttp}, neatroots gRPC :${served.ingestPorts.grpc}` : '') +
      (served.httpPort ? `; HTTP API :${served.httpPort}` : ''),
    { service: target },
  );
  await stop;
  log.info('stopping', { service: target });
  await served.close();
  return 0;
}
