import { credentials, Metadata, status, type ServiceError, type ClientOptions } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { StoreInputError, type ApiKeyGrant, type ReviewQueries } from '@neatroots/store';
import { unavailable } from './errors';

/**
 * The largest reply the api takes from the review service (grpc.max_receive_message_length;
 * grpc-js's default, 4 MiB, refused the run page of 20 spans of 300 KB). A page of spans holds
 * at most SPAN_PAGE_BYTES (16 MiB) of them, but always its first span, which may be 12 MiB +
 * 64 KiB (3 bytes a character of the default NEATROOTS_MAX_ITEM_CHARS, and its envelope); the
 * run page adds the run, its final output and its findings. 64 MiB holds the largest page and
 * room for those.
 */
export const REVIEW_REPLY_BYTES = 64 * 1024 * 1024;

/** Where the review service puts the store's error code (services/review's INPUT_ERROR_CODE). */
const INPUT_ERROR_CODE = 'neatroots-error-code';

/**
 * The review service's queries over gRPC: what the api uses in the distributed deployment
 * (in-process it calls the same ReviewQueries directly).
 */
export class ReviewGrpcClient implements ReviewQueries {
  private readonly client: v1.ReviewClient;

  constructor(address: string, private readonly timeoutMs = 10_000, clientOptions: ClientOptions = {}) {
    this.client = new v1.ReviewClient(address, credentials.createInsecure(), { 'grpc.max_receive_message_length': REVIEW_REPLY_BYTES, ...clientOptions });
  }

  private call<Req, Res>(method: (req: Req, md: Metadata, opts: { deadline: Date }, cb: (err: ServiceError | null, res: Res) => void) => unknown, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.client, req, new Metadata(), { deadline: new Date(Date.now() + this.timeoutMs) }, (err: ServiceError | null, res: Res) => {
        if (!err) return resolve(res);
        // Bad input is the caller's (400); anything else is the review service being unwell
        // (5xx), or its answer too large to pass (502, not to be retried).
        if (err.code === status.INVALID_ARGUMENT) reject(new StoreInputError(String(err.metadata?.get(INPUT_ERROR_CODE)[0] ?? 'invalid_argument'), err.details));
        else reject(unavailable(err, 'review', this.timeoutMs) ?? new Error(`review service: ${err.details || err.message}`));
      });
    });
  }

  private async json<T>(p: Promise<v1.JsonReply>): Promise<T | null> {
    const r = await p;
    return r.found ? (JSON.parse(r.json) as T) : null;
  }

  private async must<T>(p: Promise<v1.JsonReply>): Promise<T> {
    const v = await this.json<T>(p);
    if (v === null) throw new Error('review service: empty reply');
    return v;
  }

  listRuns: ReviewQueries['listRuns'] = (project, q = {}) =>
    this.must(
      this.call<v1.ListRunsRequest, v1.JsonReply>(this.client.listRuns as never, {
        project,
        workflow: q.workflow ?? '',
        session_id: q.session_id ?? '',
        end_status: q.end_status ?? '',
        has_open_findings: q.has_open_findings,
        from: q.from ?? '',
        to: q.to ?? '',
        limit: q.limit ?? 0,
        cursor: q.cursor ?? '',
      }),
    );

  getRun: ReviewQueries['getRun'] = (project, runId, q = {}) =>
    this.json(this.call<v1.GetRunRequest, v1.JsonReply>(this.client.getRun as never, { project, run_id: runId, spans_limit: q.spans_limit ?? 0, bodies: q.bodies ?? '', spans_since: q.since ?? '' }));

  listSpans: ReviewQueries['listSpans'] = (project, runId, q = {}) =>
    this.json(
      this.call<v1.ListSpansRequest, v1.JsonReply>(this.client.listSpans as never, { project, run_id: runId, limit: q.limit ?? 0, cursor: q.cursor ?? '', bodies: q.bodies ?? '' }),
    );

  getSpan: ReviewQueries['getSpan'] = (project, runId, spanId) =>
    this.json(this.call<v1.GetSpanRequest, v1.JsonReply>(this.client.getSpan as never, { project, run_id: runId, span_id: spanId }));

  listFindings: ReviewQueries['listFindings'] = (project, q = {}) =>
    this.must(
      this.call<v1.ListFindingsRequest, v1.JsonReply>(this.client.listFindings as never, {
        project,
        state: q.state ?? '',
        limit: q.limit ?? 0,
        cursor: q.cursor ?? '',
        run_id: q.run_id ?? '',
        check_id: '',
        include_quiet: q.include_quiet,
      }),
    );

  dismiss: ReviewQueries['dismiss'] = (project, id, input = {}) =>
    this.json(this.call<v1.FindingActionRequest, v1.JsonReply>(this.client.dismiss as never, { project, finding_id: id, note: input.note ?? '', by: input.by ?? '' }));

  reopen: ReviewQueries['reopen'] = (project, id) =>
    this.json(this.call<v1.FindingActionRequest, v1.JsonReply>(this.client.reopen as never, { project, finding_id: id, note: '', by: '' }));

  checkStats: ReviewQueries['checkStats'] = (project) => this.must(this.call<v1.ProjectRequest, v1.JsonReply>(this.client.checkStats as never, { project }));

  listDeadLetters: ReviewQueries['listDeadLetters'] = (project, q = {}) =>
    this.must(this.call<v1.ListDeadLettersRequest, v1.JsonReply>(this.client.listDeadLetters as never, { project, limit: q.limit ?? 0, cursor: q.cursor ?? '' }));

  /**
   * The project an API key opens and its scope (null when none), asked of the review service.
   * No scope is a review service older than scopes, whose keys were all full; a scope this api
   * does not know is taken as the narrowest it does, ingest.
   */
  async resolveKey(key: string): Promise<ApiKeyGrant | null> {
    const r = await this.call<v1.ResolveKeyRequest, v1.ResolveKeyReply>(this.client.resolveKey as never, { key });
    if (!r.project) return null;
    return { project: r.project, scope: r.scope === '' || r.scope === 'api' ? 'api' : 'ingest' };
  }

  close(): void {
    this.client.close();
  }
}
