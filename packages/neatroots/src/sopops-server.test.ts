import type { INestApplication } from '@nestjs/common';
import type { ApiOptions } from '@neatroots/api';
import type { Db } from '@neatroots/ports';
import type { InlineJobs } from '@neatroots/platform';
import type { Sop, SopOptions } from '@neatroots/review';
// The api's SOP harness is a test helper: the api package does not export it.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startApiOn, startSopOn } from '../../../services/api/src/sop-harness.test';
import { main } from './sopops';

/**
 * What the `sopops` CLI specs share: a running server (the api on the review service's SOP
 * side, PGlite, inline jobs) for the CLI to talk to, and the CLI run in-process with its
 * output collected. Named *.test.ts: a helper, neither run by jest (it runs *.spec.ts) nor built.
 */
export interface SopopsServer {
  db: Db;
  jobs: InlineJobs;
  sop: Sop;
  app: INestApplication;
  /** The api's root URL, for --url or NEATROOTS_URL. */
  url: string;
  close(): Promise<void>;
}

export interface SopopsServerOptions {
  /** Review's options beyond the database and jobs (may need the database). */
  sop?: Partial<Omit<SopOptions, 'db' | 'jobs'>> | ((db: Db) => Partial<Omit<SopOptions, 'db' | 'jobs'>>);
  /** What to store before the api starts: head, releases, checked sessions. */
  prepare?: (sop: Sop, db: Db) => Promise<void>;
  api?: Partial<ApiOptions>;
}

/** The server for `workspace` with `key`, sessions checked by tool calls alone unless told otherwise. */
export async function startSopopsServer(workspace: string, key: string, opts: SopopsServerOptions = {}): Promise<SopopsServer> {
  const started = await startSopOn({ [workspace]: key }, opts.sop);
  await opts.prepare?.(started.sop, started.db);
  const { app, url } = await startApiOn(started.db, workspace, started.sop.queries, started.sop.review, opts.api);
  return {
    ...started,
    app,
    url,
    close: async () => {
      await app.close();
      await started.close();
    },
  };
}

/** `sopops <args>` in-process with this environment; its exit status and the lines it wrote. */
export async function runSopops(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), env, cwd: process.cwd() });
  return { code, out, err };
}
