import { credentials, Metadata, status, type sendUnaryData, type ServerUnaryCall, type ServiceError, type StatusObject, type ClientOptions } from '@grpc/grpc-js';
import { isInfrastructureError } from '@neatroots/ports';
import { v1 } from '@neatroots/proto';
import type { AgreementRecord, HandedTask, Plan, QuestionResult, SavedModel } from '@neatroots/questions';
import { StoreInputError, type DbCheckInput, type DbCheckRecord } from '@neatroots/store';
import type { ReviewData } from './data';

/**
 * ReviewData over gRPC (neatroots.v1.ReviewData): the server half runs in the review service,
 * the client half in the rule engine and the question service of the distributed deployment.
 * Maps travel as lists of [key, value] pairs.
 *
 * Errors: a request the store refuses is INVALID_ARGUMENT; an error that says a dependency is
 * down (the database restarting, unreachable, out of connections, too slow: isInfrastructureError)
 * is UNAVAILABLE, with the Postgres SQLSTATE (when there is one) in the `sqlstate` trailer;
 * anything else INTERNAL. The client's error keeps the gRPC code, so the callers' bus guard
 * retries the batch instead of setting it aside while review or its database is away.
 */
const ok = (v: unknown = null): v1.JsonReply => ({ found: v !== null && v !== undefined, json: v === null || v === undefined ? '' : JSON.stringify(v) });
const parse = <T>(json: string, what: string): T => {
  try {
    return JSON.parse(json) as T;
  } catch (e) {
    throw new StoreInputError('json', `${what}: not valid JSON (${(e as Error).message})`);
  }
};

/** The gRPC status a store error is answered with. */
function statusOf(err: unknown): Partial<StatusObject> {
  if (err instanceof StoreInputError) return { code: status.INVALID_ARGUMENT, details: err.message };
  const details = `review: ${(err as Error)?.message ?? String(err)}`;
  if (!isInfrastructureError(err)) return { code: status.INTERNAL, details };
  const sqlstate = (err as { code?: unknown })?.code;
  const metadata = new Metadata();
  if (typeof sqlstate === 'string' && /^[0-9A-Z]{5}$/.test(sqlstate)) metadata.set('sqlstate', sqlstate);
  return { code: status.UNAVAILABLE, details, metadata };
}

/**
 * A failed call to the review service: the message names the method; `code` is the gRPC
 * status (UNAVAILABLE and DEADLINE_EXCEEDED say review or its database is away, and
 * UNAUTHENTICATED that it refuses this process's NEATROOTS_INTERNAL_TOKEN, which
 * isInfrastructureError reads), `details` the server's words, `sqlstate` the database's
 * SQLSTATE when review sent one, `cause` grpc-js's error; `service` names review (the api
 * answers such an error as the review service's: 503 when it is away or refuses the token).
 */
export class ReviewServiceError extends Error {
  readonly service = 'review';
  readonly code: number;
  readonly details: string;
  readonly sqlstate?: string;

  constructor(method: string, err: ServiceError) {
    super(`review service: ${method}: ${err.details || err.message}`, { cause: err });
    this.name = 'ReviewServiceError';
    this.code = err.code;
    this.details = err.details ?? '';
    const sqlstate = err.metadata?.get('sqlstate')[0];
    if (typeof sqlstate === 'string') this.sqlstate = sqlstate;
  }
}

export function reviewDataGrpcService(data: ReviewData): { service: typeof v1.ReviewDataService; implementation: v1.ReviewDataServer } {
  const unary =
    <Req, Res>(fn: (req: Req) => Promise<Res>) =>
    (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>) => {
      fn(call.request).then(
        (res) => cb(null, res),
        (err: unknown) => cb(statusOf(err)),
      );
    };
  const implementation: v1.ReviewDataServer = {
    quietChecks: unary(async (r: v1.ProjectRequest) => ({ check_ids: await data.quietChecks(r.project) })),
    steering: unary(async (r: v1.ProjectRequest) => ({ on: await data.steering(r.project) })),
    listChecks: unary(async (r: v1.JsonRequest) => {
      const q = r.json ? parse<{ project?: string }>(r.json, 'query') : {};
      return ok(typeof q.project === 'string' ? await data.checkRecords(q.project) : await data.checks());
    }),
    putCheck: unary(async (r: v1.JsonRequest) => ok(await data.putCheck(parse<DbCheckInput>(r.json, 'check')))),
    deleteCheck: unary(async (r: v1.JsonRequest) => {
      const q = parse<{ project: string; id: string }>(r.json, 'check');
      return (await data.deleteCheck(String(q.project), String(q.id))) ? ok(true) : ok();
    }),
    getPlan: unary(async (r: v1.PlanRequest) => ok(await data.plans.get(r.project, r.workflow))),
    putPlan: unary(async (r: v1.JsonRequest) => ok(await data.plans.put(parse<Plan>(r.json, 'plan')))),
    loadClassifierModels: unary(async (r: v1.KeysRequest) => ok([...(await data.classifier.load(r.keys))])),
    saveClassifierModels: unary(async (r: v1.JsonRequest) => ok(await data.classifier.save(parse(r.json, 'models')))),
    loadAgreement: unary(async (r: v1.KeysRequest) => ok([...(await data.agreement.load(r.keys))])),
    saveAgreement: unary(async (r: v1.JsonRequest) => ok(await data.agreement.save(parse(r.json, 'agreement')))),
    listAgreement: unary(async () => ok(await data.agreement.list())),
    recordResults: unary(async (r: v1.JsonRequest) => ok(await data.results.record(parse<QuestionResult[]>(r.json, 'results')))),
    recordHanded: unary(async (r: v1.JsonRequest) => ok(await data.results.handed?.(parse<HandedTask[]>(r.json, 'tasks')))),
  };
  return { service: v1.ReviewDataService, implementation };
}

/**
 * The largest reply a ReviewDataClient takes (grpc.max_receive_message_length), as the api's
 * ReviewGrpcClient takes from the review service (REVIEW_REPLY_BYTES). ListChecks answers every
 * database check of the deployment (a project's, for the api's checks endpoints and MCP tools),
 * each with its YAML of up to 100 KiB: with grpc-js's default, 4 MiB, a project's 104 checks of
 * 40 KB made every checks endpoint and tool answer 502 and every service's check set stop
 * reloading (a check saved then never took effect).
 */
export const REVIEW_DATA_REPLY_BYTES = 64 * 1024 * 1024;

/** The review service's data, asked over gRPC. */
export class ReviewDataClient implements ReviewData {
  private readonly client: v1.ReviewDataClient;

  constructor(address: string, private readonly timeoutMs = 10_000, clientOptions: ClientOptions = {}) {
    this.client = new v1.ReviewDataClient(address, credentials.createInsecure(), { 'grpc.max_receive_message_length': REVIEW_DATA_REPLY_BYTES, ...clientOptions });
  }

  private call<Req, Res>(method: string, req: Req): Promise<Res> {
    const fn = (this.client as unknown as Record<string, (r: Req, md: Metadata, o: { deadline: Date }, cb: (e: ServiceError | null, res: Res) => void) => void>)[method];
    return new Promise((resolve, reject) =>
      fn.call(this.client, req, new Metadata(), { deadline: new Date(Date.now() + this.timeoutMs) }, (err, res) =>
        err ? reject(new ReviewServiceError(method, err)) : resolve(res),
      ),
    );
  }

  private async json<T>(method: string, req: unknown): Promise<T | undefined> {
    const r = await this.call<unknown, v1.JsonReply>(method, req);
    return r.found ? (JSON.parse(r.json) as T) : undefined;
  }

  private send(method: string, value: unknown): Promise<void> {
    return this.call<v1.JsonRequest, v1.JsonReply>(method, { json: JSON.stringify(value) }).then(() => undefined);
  }

  async quietChecks(project: string): Promise<string[]> {
    return (await this.call<v1.ProjectRequest, v1.CheckIdsReply>('quietChecks', { project })).check_ids;
  }

  async steering(project: string): Promise<boolean> {
    return (await this.call<v1.ProjectRequest, v1.SteeringReply>('steering', { project })).on;
  }

  async checks(): Promise<{ id: string; yaml: string; origin: string }[]> {
    return (await this.json<{ id: string; yaml: string; origin: string }[]>('listChecks', { json: '' })) ?? [];
  }

  async checkRecords(project: string): Promise<DbCheckRecord[]> {
    return (await this.json<DbCheckRecord[]>('listChecks', { json: JSON.stringify({ project }) })) ?? [];
  }

  putCheck(c: DbCheckInput): Promise<void> {
    return this.send('putCheck', c);
  }

  async deleteCheck(project: string, id: string): Promise<boolean> {
    return (await this.json<boolean>('deleteCheck', { json: JSON.stringify({ project, id }) })) === true;
  }

  readonly plans: ReviewData['plans'] = {
    get: (project, workflow) => this.json<Plan>('getPlan', { project, workflow }),
    put: (plan) => this.send('putPlan', plan),
  };

  readonly classifier: ReviewData['classifier'] = {
    load: async (keys) => new Map((await this.json<[string, SavedModel][]>('loadClassifierModels', { keys: [...keys] })) ?? []),
    save: (models) => this.send('saveClassifierModels', models),
  };

  readonly agreement: ReviewData['agreement'] = {
    load: async (keys) => new Map((await this.json<[string, AgreementRecord][]>('loadAgreement', { keys: [...keys] })) ?? []),
    save: (records) => this.send('saveAgreement', records),
    list: async () => (await this.json<AgreementRecord[]>('listAgreement', { json: '' })) ?? [],
  };

  readonly results: ReviewData['results'] = {
    record: (results) => this.send('recordResults', results),
    handed: (tasks) => this.send('recordHanded', tasks),
  };

  close(): void {
    this.client.close();
  }
}
