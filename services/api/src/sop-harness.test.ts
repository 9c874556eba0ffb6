import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
// The api's tests run it on the real review service and adapters; outside its tests it may not import them.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { InlineJobs, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { createReviewQueries, sopGrpcService, startSop, type Sop, type SopOptions } from '@neatroots/review';
import { checkSession, noModelDecider, readFolder, type DecisionGateway } from '@neatroots/sop';
import { ProjectsRepo, type ReviewSopQueries, type SopQueries } from '@neatroots/store';
// The local OpenAI-compatible server is a test helper: the platform package does not export it.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startFakeOpenAI, type FakeOpenAI, type FakeScript } from '../../../libs/platform/src/models/fake-openai.test';
import { apiUrl, createApi, type ApiOptions } from './api';
import { SopGrpcClient } from './sop-client';

/**
 * What the api's SOP endpoint tests share: the review service's SOP side as startSop runs it
 * (PGlite, inline jobs), served both in-process and over gRPC (neatroots.v1.Sop, the api on its
 * client: the distributed deployment), so each test runs the same calls against both.
 * Named *.test.ts: a helper, neither run by jest (it runs *.spec.ts) nor built.
 */
export const FIXTURES = path.resolve(__dirname, '../../../libs/sop/fixtures');

/** A fixture session (libs/sop/fixtures/sessions/<name>/session.json) as it is sent. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const fixtureSession = (name: string): any => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'session.json'), 'utf8'));

/** A fixture workspace folder (libs/sop/fixtures/<name>) as the files pushed to head. */
export const fixtureFolder = (name = 'luigis') => [...readFolder(path.join(FIXTURES, name)).entries()].map(([p, text]) => ({ path: p, text }));

/** Sessions checked by tool calls alone: no model is configured. */
export const toolsOnly: SopOptions['checkSession'] = ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider('no model is configured'), releaseId });

/** A migrated PGlite database with these API keys (workspace -> key). */
export async function keyedDb(keys: Record<string, string>): Promise<Db> {
  const db = await openPglite();
  await migrate(db);
  for (const [ws, key] of Object.entries(keys)) await new ProjectsRepo(db).addApiKey(ws, key);
  return db;
}

/** These queries served as neatroots.v1.Sop on a free loopback port, and a client of them. */
export async function servedOverGrpc(queries: SopQueries, review: ReviewSopQueries): Promise<{ client: SopGrpcClient; close(): void }> {
  const grpc = new Server();
  const svc = sopGrpcService(queries, review);
  grpc.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) => grpc.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  const client = new SopGrpcClient(`127.0.0.1:${port}`);
  return {
    client,
    close: () => {
      client.close();
      grpc.forceShutdown();
    },
  };
}

export interface SopHarness {
  db: Db;
  jobs: InlineJobs;
  sop: Sop;
  client: SopGrpcClient;
  close(): Promise<void>;
}

type MoreOptions = Partial<Omit<SopOptions, 'db' | 'jobs'>>;

/** The SOP side as startSop runs it (inline jobs, tool calls alone unless told) on a fresh database with these keys; options may need the database. */
export async function startSopOn(keys: Record<string, string>, opts: MoreOptions | ((db: Db) => MoreOptions) = {}): Promise<Omit<SopHarness, 'client'>> {
  const db = await keyedDb(keys);
  const jobs = new InlineJobs();
  const sop = await startSop({ db, jobs, checkSession: toolsOnly, ...(typeof opts === 'function' ? opts(db) : opts) });
  return {
    db,
    jobs,
    sop,
    close: async () => {
      await jobs.close();
      await db.close();
    },
  };
}

/** The SOP side on a fresh database with these keys, in-process and over gRPC. */
export async function startSopHarness(keys: Record<string, string>, opts: MoreOptions | ((db: Db) => MoreOptions) = {}): Promise<SopHarness> {
  const started = await startSopOn(keys, opts);
  const served = await servedOverGrpc(started.sop.queries, started.sop.review);
  return {
    ...started,
    client: served.client,
    close: async () => {
      served.close();
      await started.close();
    },
  };
}

/**
 * The question service's answerer on the local OpenAI-compatible server answering with `reply`,
 * as the decision gateway review names patterns and writes suggestions through.
 */
export async function fakeReasoning(reply: FakeScript, opts: { timeoutMs?: number; maxWaitMs?: number } = {}): Promise<{ model: FakeOpenAI; gateway: DecisionGateway; close(): Promise<void> }> {
  const model = await startFakeOpenAI(reply);
  const answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: model.url, model: 'reasoner-test', timeoutMs: opts.timeoutMs ?? 2_000 }), queue: { maxWaitMs: opts.maxWaitMs ?? 5, retries: 0 }, onError: () => undefined });
  const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
  return {
    model,
    gateway,
    close: async () => {
      answerer.close();
      await model.close();
    },
  };
}

/** The two deployments, for describe.each: [name, the api's SopQueries, its ReviewSopQueries]. */
export function deployments(h: () => SopHarness): [string, () => SopQueries, () => ReviewSopQueries][] {
  return [
    ['in-process', () => h().sop.queries, () => h().sop.review],
    ['over gRPC', () => h().client as SopQueries, () => h().client as unknown as ReviewSopQueries],
  ];
}

/** The whole api on a free loopback port over this database and these SOP queries; its workspace URL. */
export async function startApiOn(db: Db, ws: string, sop: SopQueries, review: ReviewSopQueries, more: Partial<ApiOptions> = {}): Promise<{ app: INestApplication; url: string; base: string }> {
  const app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => new ProjectsRepo(db).resolveApiKey(k), sop, review, port: 0, host: '127.0.0.1', ...more });
  return { app, url: apiUrl(app), base: `${apiUrl(app)}/v1/workspaces/${ws}` };
}

/** startApiOn for workspace luigis with its fixture folder pushed to head and published as release 1, with this key. */
export async function startPublishedApi(db: Db, sop: SopQueries, review: ReviewSopQueries, key: string): Promise<{ app: INestApplication; url: string; base: string }> {
  const started = await startApiOn(db, 'luigis', sop, review);
  expect((await send(`${started.base}/head`, 'PUT', key, { files: fixtureFolder() })).status).toBe(200);
  expect((await send(`${started.base}/releases`, 'POST', key)).status).toBe(201);
  return started;
}

/** One HTTP call with this key: a string body is sent as is (with this type), anything else as JSON. */
export async function send(url: string, method: string, key: string, body?: unknown, type = 'application/json') {
  const res = await fetch(url, {
    method,
    headers: { 'x-api-key': key, ...(body !== undefined ? { 'content-type': type } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, type: contentType, text, body: (text && contentType.includes('application/json') ? JSON.parse(text) : null) as any };
}
