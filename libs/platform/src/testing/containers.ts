import { existsSync } from 'node:fs';
import { CONTAINER_NOTE_ENV, freePort, SERVICE_ENV, type ServiceName } from './services';

/**
 * The second way integration tests get their services (see ./services.ts): where no address
 * is given and a Docker engine is reachable, testcontainers starts Kafka, Redis and Postgres
 * before the tests (jest's global setup for the integration project calls `startContainers`)
 * and the addresses are put in the environment the test files read. What happened is written
 * to NEATROOTS_TESTCONTAINERS_<SERVICE> so a skip line can say why the container is not there.
 * Given addresses are always used as they are (what CI does); nothing is started for them.
 */
export interface StartedContainers {
  /** Service -> address started. */
  started: Partial<Record<ServiceName, string>>;
  stop(): Promise<void>;
}

export function dockerReachable(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
}

/** Images, overridable for a mirror: NEATROOTS_TESTCONTAINERS_<SERVICE>_IMAGE. */
const IMAGES: Record<ServiceName, string> = {
  postgres: 'postgres:16-alpine',
  redis: 'redis:7-alpine',
  kafka: 'apache/kafka:3.8.1',
};

/**
 * Starts a container for each service whose address is missing from `env`, and sets the
 * address in `env`. Without Docker, or with NEATROOTS_TESTCONTAINERS=0, starts nothing and
 * says so in the note variables. A container that fails to start leaves its service missing
 * (the tests then skip, or fail under NEATROOTS_REQUIRE_SERVICES=1) with the error in its note.
 */
export async function startContainers(env: NodeJS.ProcessEnv = process.env): Promise<StartedContainers> {
  const wanted = (Object.keys(SERVICE_ENV) as ServiceName[]).filter((s) => !env[SERVICE_ENV[s]]?.trim());
  const started: Partial<Record<ServiceName, string>> = {};
  const stops: (() => Promise<unknown>)[] = [];
  const result = {
    started,
    stop: async () => {
      await Promise.allSettled(stops.map((s) => s()));
    },
  };
  if (!wanted.length) return result;
  if (env.NEATROOTS_TESTCONTAINERS === '0') {
    for (const s of wanted) env[CONTAINER_NOTE_ENV[s]] = 'testcontainers switched off (NEATROOTS_TESTCONTAINERS=0)';
    return result;
  }
  if (!dockerReachable(env)) {
    for (const s of wanted) env[CONTAINER_NOTE_ENV[s]] = 'no Docker engine reachable (DOCKER_HOST unset, no /var/run/docker.sock), so testcontainers could not start one';
    return result;
  }
  let tc: typeof import('testcontainers');
  try {
    tc = await import('testcontainers');
  } catch (err) {
    for (const s of wanted) env[CONTAINER_NOTE_ENV[s]] = `a Docker engine is reachable, but testcontainers did not load: ${(err as Error).message}`;
    return result;
  }
  const { GenericContainer, Wait } = tc;
  const image = (s: ServiceName) => env[`${CONTAINER_NOTE_ENV[s]}_IMAGE`] || IMAGES[s];
  await Promise.all(
    wanted.map(async (s) => {
      try {
        if (s === 'postgres') {
          const c = await new GenericContainer(image(s))
            .withEnvironment({ POSTGRES_USER: 'neatroots', POSTGRES_PASSWORD: 'neatroots', POSTGRES_DB: 'neatroots' })
            .withExposedPorts(5432)
            .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
            .start();
          stops.push(() => c.stop());
          started.postgres = `postgres://neatroots:neatroots@${c.getHost()}:${c.getMappedPort(5432)}/neatroots`;
        } else if (s === 'redis') {
          const c = await new GenericContainer(image(s)).withExposedPorts(6379).withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/)).start();
          stops.push(() => c.stop());
          started.redis = `redis://${c.getHost()}:${c.getMappedPort(6379)}`;
        } else {
          // Kafka tells clients the address to come back to: it must be the one the host sees,
          // so the host port is chosen first and advertised.
          const port = await freePort();
          const c = await new GenericContainer(image(s))
            .withExposedPorts({ container: 9092, host: port })
            .withEnvironment({
              KAFKA_NODE_ID: '1',
              KAFKA_PROCESS_ROLES: 'broker,controller',
              KAFKA_LISTENERS: 'PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093',
              KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${port}`,
              KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
              KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
              KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
              KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
              KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
              KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
              KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
            })
            .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
            .withStartupTimeout(120_000)
            .start();
          stops.push(() => c.stop());
          started.kafka = `127.0.0.1:${port}`;
        }
        env[SERVICE_ENV[s]] = started[s];
        env[CONTAINER_NOTE_ENV[s]] = `started by testcontainers (${image(s)})`;
      } catch (err) {
        env[CONTAINER_NOTE_ENV[s]] = `a Docker engine is reachable, but testcontainers could not start ${image(s)}: ${(err as Error).message}`;
      }
    }),
  );
  return result;
}
