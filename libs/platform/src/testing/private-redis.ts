import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { freePort, uniqueName } from './services';

/** The redis-server binary deploy/local/services installs, if it is here. */
export function redisServerBinary(): string | undefined {
  return ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((b) => existsSync(b));
}

/**
 * A Redis of a test's own on a loopback port, to stop (SIGKILL) and start again: outages
 * without disturbing the shared server other tests use. Without persistence unless `args` say
 * otherwise (an append-only file in a folder of the test's: a restart keeps what was written).
 */
export class PrivateRedis {
  private server: ChildProcess | undefined;
  port: number;
  private readonly args: string[];

  constructor(
    private readonly binary: string,
    opts: { port?: number; args?: string[] } = {},
  ) {
    this.port = opts.port ?? 0;
    this.args = opts.args ?? ['--appendonly', 'no'];
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts it (on the same port as before, after a stop) and waits for PONG. */
  async start(): Promise<void> {
    if (!this.port) this.port = await freePort();
    this.server = spawn(this.binary, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', ...this.args], { stdio: 'ignore' });
    const probe = new Redis({ port: this.port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: null });
    try {
      for (let i = 0; ; i++) {
        try {
          await probe.connect().catch(() => undefined);
          if ((await probe.ping()) === 'PONG') return;
        } catch {
          if (i > 100) throw new Error('private redis-server did not start');
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    } finally {
      probe.disconnect();
    }
  }

  /** Kills it (without persistence, its data is gone). */
  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s || s.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      s.once('exit', () => resolve());
      s.kill('SIGKILL');
    });
  }
}


/**
 * Key prefixes of a test's own on the shared Redis, and a plain client to look at what was
 * written under them: `next()` hands out a new prefix, `cleanup()` deletes every key under the
 * prefixes handed out and disconnects (a suite's afterAll).
 */
export class RedisScratch {
  readonly raw: Redis;
  private readonly prefixes: string[] = [];

  constructor(
    url: string,
    private readonly base: string,
  ) {
    // Connected by its first command: a suite skipped for want of Redis never connects.
    this.raw = new Redis(url, { lazyConnect: true });
  }

  next(): string {
    const p = uniqueName(this.base);
    this.prefixes.push(p);
    return p;
  }

  async cleanup(): Promise<void> {
    for (const p of this.prefixes) {
      const keys = await this.raw.keys(`${p}:*`);
      if (keys.length) await this.raw.del(...keys);
    }
    this.raw.disconnect();
  }
}
