import { credentials, status as Status, type ClientOptions } from '@grpc/grpc-js';
import { Kafka, logLevel } from 'kafkajs';
import { internalClientOptions, openPostgres, requireService } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { Cluster, freePort } from './cluster';

/**
 * The distributed deployment wired by the one composition root: `serve --target all` runs
 * every service in one process (the api asks the question service in-process), and the rule
 * engine and the question service run with no database address (the review service owns
 * Postgres and answers them over gRPC).
 */
const SUITE = 'distributed composition';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `comp-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;

maybe(SUITE, () => {
  it('serve --target all answers GET /v1/projects/{p}/models/agreement from its own question service', async () => {
    const cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    // The test cluster's database is its own on the server (migrated by review), dropped with it.
    const server = await openPostgres({ url: pg!, max: 1 });
    const named = async () => (await server.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = $1', [cluster.prefix])).rows.length;
    try {
      expect(new URL(cluster.pgUrl).pathname).toBe(`/${cluster.prefix}`);
      await cluster.start('all');
      const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/models/agreement`, { headers: { 'x-api-key': KEY } });
      expect([res.status, await res.json()]).toEqual([200, { questions: [] }]);
      expect(await named()).toBe(1);
    } finally {
      await cluster.close();
    }
    try {
      expect(await named()).toBe(0);
    } finally {
      await server.close();
    }
  }, 120_000);

  it('starts the rule engine and the question service without NEATROOTS_PG_URL, and refuses review without it', async () => {
    const cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    try {
      await expect(cluster.start('review', { NEATROOTS_PG_URL: undefined })).rejects.toThrow(/NEATROOTS_PG_URL is required for --target review/);
      await cluster.start('review');
      const noDb = { NEATROOTS_PG_URL: undefined };
      const [engine, question] = await Promise.all([cluster.start('rule-engine', noDb), cluster.start('question', noDb)]);
      for (const sp of [engine, question]) {
        const ready = await fetch(`http://127.0.0.1:${sp.adminPort}/readyz`);
        expect([sp.target, ready.status]).toEqual([sp.target, 200]);
      }
      // The api reaches the question service over gRPC.
      await cluster.start('api');
      const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/models/agreement`, { headers: { 'x-api-key': KEY } });
      expect(res.status).toBe(200);
      // The services' own ports answer the deployment's services only: a call without the
      // internal token (anyone else who reaches the port) is refused; the api's carried it.
      const resolveKey = (options: ClientOptions) =>
        new Promise<string>((resolve) => {
          const client = new v1.ReviewClient(`127.0.0.1:${cluster.ports.review}`, credentials.createInsecure(), options);
          client.resolveKey({ key: KEY }, (err, r) => {
            client.close();
            resolve(err ? Status[err.code] : r.project);
          });
        });
      expect(await resolveKey({})).toBe('UNAUTHENTICATED');
      expect(await resolveKey(internalClientOptions(cluster.env.NEATROOTS_INTERNAL_TOKEN))).toBe(PROJECT);
    } finally {
      await cluster.close();
    }
  }, 180_000);

  it('runs one Kafka consumer of the question tasks per question service (its fetches bring every partition), more with NEATROOTS_QUESTION_CONSUMERS', async () => {
    const cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    const admin = new Kafka({ brokers: kafka!, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    // The group's members once it is stable with `n` of them (a replica joining rebalances it).
    const members = async (n: number): Promise<number> => {
      let last = -1;
      for (let i = 0; i < 150; i++) {
        const { groups } = await admin.describeGroups([`${cluster.prefix}.question`]);
        last = groups[0]?.members.length ?? 0;
        if (groups[0]?.state === 'Stable' && last === n) return last;
        await new Promise((r) => setTimeout(r, 200));
      }
      return last;
    };
    try {
      await cluster.start('review');
      await cluster.start('question');
      expect(await members(1)).toBe(1);
      await cluster.start('question', { NEATROOTS_QUESTION_PORT: String(await freePort()), NEATROOTS_QUESTION_CONSUMERS: '2' });
      expect(await members(3)).toBe(3);
    } finally {
      await admin.disconnect();
      await cluster.close();
    }
  }, 180_000);
});
