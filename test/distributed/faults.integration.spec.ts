import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { openPostgres, PrivateRedis, redisServerBinary, requireService } from '@neatroots/platform';
import { Cluster, freePort, type ServiceProc } from './cluster';
import { checkOf, compare, expected, fleet, send } from './fleet';

const SERVICES = path.resolve(__dirname, '../../deploy/local/services');

/**
 * Faults on the real servers: while a fleet's spans flow, the rule engine is killed with
 * SIGKILL and started again; a second replica joins and leaves; Redis, the Kafka broker and
 * Postgres are restarted (private instances, so other tests on the shared servers are not
 * disturbed). After
 * each, the findings in Postgres must be exactly those `neatroots replay` computes for the
 * same spans: each once (same ids), none missing, none extra, each in the same final state.
 */
const SUITE = 'fault tolerance on the real servers';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

/** Findings of the project once the engine and the store have caught up (stable for a while). */
async function storedFindings(project: string, want: number, url: string): Promise<Map<string, string>> {
  const db = await openPostgres({ url });
  try {
    let last = -1;
    let stableSince = Date.now();
    const end = Date.now() + 120_000;
    for (;;) {
      const r = await db.query<{ id: string; status: string }>('SELECT id, status FROM findings WHERE project = $1', [project]);
      const n = r.rows.length;
      if (n !== last) {
        last = n;
        stableSince = Date.now();
      }
      if ((n >= want && Date.now() - stableSince > 3000) || Date.now() > end) return new Map(r.rows.map((x) => [x.id, x.status]));
      await new Promise((res) => setTimeout(res, 250));
    }
  } finally {
    await db.close();
  }
}

/** The bus lines of a process's /metrics (consumed, published, lag, backlog), or why they could not be read. */
async function busMetrics(adminPort: number): Promise<string> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
    return text.split('\n').filter((l) => /^neatroots_(bus_|consumer_lag)/.test(l)).join('\n');
  } catch (e) {
    return `metrics unreadable: ${(e as Error).message}`;
  }
}

maybe(SUITE, () => {
  const runs = 160;
  const perRun = 25;

  async function scenario(name: string, extraEnv: Record<string, string>, fault: (c: Cluster, engine: ServiceProc, frac: number) => Promise<void>) {
    const project = `${name}-${Date.now().toString(36)}`;
    const key = `key-${project}`;
    const cluster = new Cluster(
      { kafka: kafka!, redis: redis!, pg: pg! },
      { NEATROOTS_API_KEYS: `${project}=${key}`, NEATROOTS_KAFKA_SESSION_TIMEOUT_MS: '6000', ...extraEnv },
    );
    await cluster.init();
    try {
      await cluster.start('review');
      await cluster.start('ingest');
      const engine = await cluster.start('rule-engine');
      const items = fleet(project, runs, perRun);
      const want = await expected(items, cluster.home);
      expect(want.size).toBeGreaterThan(50);
      await send(cluster.ports.grpc, key, items, (frac) => fault(cluster, engine, frac));
      const got = await storedFindings(project, want.size, cluster.pgUrl);
      const diff = compare(got, want);
      if (diff.missing.length || diff.extra.length) {
        // What went wrong, for whoever reads the failure: which checks and runs, and the engines' logs.
        // First what fits in a short CI excerpt: which consumer stopped short (each process's bus
        // counters and lag, now) and the last consumer crash each one logged; then the logs.
        const summary = await Promise.all(
          cluster.procs.map(async (p) => {
            const crashes = p.output.join('').split('\n').filter((l) => /crash/i.test(l));
            return `--- ${p.target}: ${crashes.length} crash lines, last: ${crashes.at(-1)?.slice(0, 400) ?? 'none'}\n${await busMetrics(p.adminPort)}`;
          }),
        );
        console.error(`${name}: ${diff.missing.length} missing (${diff.missing.slice(0, 20).map((k) => checkOf.get(k)).join(' ')})\n${summary.join('\n')}`);
        for (const p of cluster.procs) console.error(`--- ${p.target}\n${p.output.join('').slice(-3000)}`);
      }
      expect({ name, ...diff, stored: got.size }).toEqual({ name, missing: [], extra: [], wrongState: [], stored: want.size });
    } finally {
      await cluster.close();
    }
  }

  it('loses and repeats nothing when the rule engine is killed with SIGKILL and restarted', async () => {
    let killed = false;
    await scenario('sigkill', {}, async (c, engine, frac) => {
      if (frac >= 0.3 && !killed) {
        killed = true;
        engine.proc.kill('SIGKILL');
        await new Promise((r) => engine.proc.once('exit', r));
        c.procs.splice(c.procs.indexOf(engine), 1);
        await c.start('rule-engine');
      }
    });
  }, 300_000);

  it('loses and repeats nothing when a second replica joins and leaves mid-stream', async () => {
    let second: ServiceProc | undefined;
    await scenario('replica', {}, async (c, _engine, frac) => {
      if (frac >= 0.2 && !second) second = await c.start('rule-engine');
      else if (frac >= 0.6 && second) {
        await c.stop(second);
        second = undefined;
      }
    });
  }, 300_000);

  it('waits out a Redis restart and loses nothing acknowledged', async () => {
    // A private Redis with an append-only file, so a restart keeps the windows (as a
    // production Redis for the rule engine should be configured).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-redis-'));
    const own = new PrivateRedis(redisServerBinary() ?? 'redis-server', { port: await freePort(), args: ['--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always'] });
    await own.start();
    let restarted = false;
    try {
      await scenario('redis', { NEATROOTS_REDIS_URL: own.url }, async (_c, _engine, frac) => {
        if (frac >= 0.4 && !restarted) {
          restarted = true;
          await own.stop();
          await new Promise((res) => setTimeout(res, 1500));
          await own.start();
        }
      });
    } finally {
      await own.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
  /**
   * A private instance of a service (deploy/local/services with its own state folder and
   * ports), stopped and started again by the test; Kafka's jars come from the shared cache.
   */
  async function privateService(name: 'kafka' | 'postgres'): Promise<{ env: Record<string, string>; restart(pauseMs: number): Promise<void>; remove(): Promise<void> }> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `neatroots-${name}-`));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NEATROOTS_SERVICES_DIR: dir,
      NEATROOTS_KAFKA_CACHE_DIR: path.join(process.env.NEATROOTS_SERVICES_DIR ?? path.join(os.homedir(), '.cache', 'neatroots-services'), 'kafka-dist'),
      NEATROOTS_KAFKA_PORT: String(await freePort()),
      NEATROOTS_KAFKA_CONTROLLER_PORT: String(await freePort()),
      NEATROOTS_PG_PORT: String(await freePort()),
    };
    // Output to a file, not a pipe: the daemon the script starts would hold a pipe open.
    const run = (cmd: string) =>
      new Promise<void>((resolve, reject) => {
        const log = path.join(dir, `${cmd}.log`);
        const fd = fs.openSync(log, 'a');
        const p = spawn(SERVICES, [cmd, name], { env, stdio: ['ignore', fd, fd] });
        fs.closeSync(fd);
        p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`services ${cmd} ${name} exited ${code}:\n${fs.readFileSync(log, 'utf8').slice(-3000)}`))));
      });
    await run('up');
    const vars = await new Promise<string>((resolve) => {
      const p = spawn(SERVICES, ['env'], { env, stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      p.on('exit', () => resolve(out));
    });
    const get = (v: string) => new RegExp(`${v}=(\\S+)`).exec(vars)![1];
    return {
      env: name === 'kafka' ? { NEATROOTS_KAFKA_BROKERS: get('NEATROOTS_KAFKA_BROKERS') } : { NEATROOTS_PG_URL: get('NEATROOTS_PG_URL') },
      restart: async (pauseMs) => {
        await run('down');
        await new Promise((r) => setTimeout(r, pauseMs));
        await run('up');
      },
      remove: async () => {
        await run('down').catch(() => undefined);
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }

  it('waits out a Kafka broker restart and loses nothing acknowledged', async () => {
    const broker = await privateService('kafka');
    // A topic an earlier test run left three hours ago: deleted when the broker is started again
    // (deploy/local/services), while the running test's own young topics are kept.
    const left = `nrt${(Date.now() - 3 * 3_600_000).toString(36)}left.events`;
    const admin = () => new Kafka({ clientId: 'faults-spec', brokers: broker.env.NEATROOTS_KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING }).admin();
    const topics = async (create?: string) => {
      const a = admin();
      await a.connect();
      try {
        if (create) await a.createTopics({ topics: [{ topic: create, numPartitions: 1 }], waitForLeaders: true });
        return await a.listTopics();
      } finally {
        await a.disconnect();
      }
    };
    expect(await topics(left)).toContain(left);
    let restarted = false;
    try {
      await scenario('kafka', broker.env, async (_c, _engine, frac) => {
        if (frac >= 0.4 && !restarted) {
          restarted = true;
          await broker.restart(2000);
          expect(await topics()).not.toContain(left);
        }
      });
    } finally {
      await broker.remove();
    }
  }, 600_000);

  it('waits out a Postgres restart and loses nothing acknowledged', async () => {
    const db = await privateService('postgres');
    let restarted = false;
    try {
      await scenario('postgres', db.env, async (_c, _engine, frac) => {
        if (frac >= 0.4 && !restarted) {
          restarted = true;
          await db.restart(2000);
        }
      });
    } finally {
      await db.remove();
    }
  }, 600_000);
});
