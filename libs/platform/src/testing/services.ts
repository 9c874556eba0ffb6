import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Which real services the integration tests use (issue 3, "tests choose their services"):
 *
 * 1. the address from the environment when it is given (what `deploy/local/services env`
 *    prints, and what .ci/run sets);
 * 2. otherwise testcontainers, where a Docker engine is reachable: the integration project's
 *    global setup (./containers.ts) starts the missing services and puts their addresses in
 *    the environment before any test file reads it;
 * 3. otherwise the suite is skipped, with one line on stderr saying why (never silently).
 *
 * With NEATROOTS_REQUIRE_SERVICES=1 (CI) a missing service fails the test file instead of
 * skipping it: nothing may skip in CI.
 *
 * Usage in a *.integration.spec.ts (no jest types here: this file is part of the build):
 *
 *   const kafka = serviceOrSkip('kafka', 'KafkaBus');
 *   (kafka ? describe : describe.skip)('KafkaBus', () => { ... kafka!.brokers ... });
 */
export type ServiceName = 'kafka' | 'redis' | 'postgres';

export interface ServiceAddresses {
  kafka: { brokers: string[] };
  redis: { url: string };
  postgres: { url: string };
}

export const SERVICE_ENV: Record<ServiceName, string> = {
  kafka: 'NEATROOTS_KAFKA_BROKERS',
  redis: 'NEATROOTS_REDIS_URL',
  postgres: 'NEATROOTS_PG_URL',
};

/** What testcontainers did for each service (set by ./containers.ts), quoted in the skip line. */
export const CONTAINER_NOTE_ENV: Record<ServiceName, string> = {
  kafka: 'NEATROOTS_TESTCONTAINERS_KAFKA',
  redis: 'NEATROOTS_TESTCONTAINERS_REDIS',
  postgres: 'NEATROOTS_TESTCONTAINERS_POSTGRES',
};

export type ServiceLookup<K extends ServiceName> = { found: ServiceAddresses[K] } | { missing: string };

/** Where `name` is, or why it is not available. Pure: no logging, no throwing. */
export function findService<K extends ServiceName>(name: K, env: NodeJS.ProcessEnv = process.env): ServiceLookup<K> {
  const v = env[SERVICE_ENV[name]]?.trim();
  if (v) {
    if (name === 'kafka') {
      const brokers = v.split(',').map((b) => b.trim()).filter(Boolean);
      return { found: { brokers } as ServiceAddresses[K] };
    }
    return { found: { url: v } as ServiceAddresses[K] };
  }
  const docker = Boolean(env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
  const note =
    env[CONTAINER_NOTE_ENV[name]] ??
    (docker
      ? 'a Docker engine is reachable, but testcontainers was not asked (only the integration project of jest starts containers)'
      : 'no Docker engine reachable for testcontainers');
  return { missing: `set ${SERVICE_ENV[name]} or run deploy/local/services up; ${note}` };
}

export function servicesRequired(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.NEATROOTS_REQUIRE_SERVICES === '1' || env.NEATROOTS_REQUIRE_SERVICES === 'true';
}

export class MissingServiceError extends Error {
  constructor(suite: string, name: ServiceName, why: string) {
    super(`${suite} needs ${name} and NEATROOTS_REQUIRE_SERVICES=1 forbids skipping (${why})`);
    this.name = 'MissingServiceError';
  }
}

/**
 * The service's address, or undefined after printing one skip line. Throws when services are
 * required (CI), which fails the test file that called it. Call it at the top of the file.
 */
export function serviceOrSkip<K extends ServiceName>(name: K, suite: string, env: NodeJS.ProcessEnv = process.env): ServiceAddresses[K] | undefined {
  const r = findService(name, env);
  if ('found' in r) return r.found;
  if (servicesRequired(env)) throw new MissingServiceError(suite, name, r.missing);
  // stderr, not console.warn: one line, shown even with jest --silent.
  process.stderr.write(`skipping ${suite}: no ${name} (${r.missing})\n`);
  return undefined;
}

/** As serviceOrSkip, for the address only: the broker list for kafka, the URL otherwise. */
export function requireService(name: 'kafka', suite: string): string[] | undefined;
export function requireService(name: 'redis' | 'postgres', suite: string): string | undefined;
export function requireService(name: ServiceName, suite: string): string[] | string | undefined {
  const s = serviceOrSkip(name, suite);
  if (!s) return undefined;
  return 'brokers' in s ? s.brokers : s.url;
}

/** A name no earlier test run used: topics, groups, key prefixes, schemas. */
export function uniqueName(base: string): string {
  return `${base}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

/** A loopback port free now (the OS's pick), for a server a test starts next. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}
