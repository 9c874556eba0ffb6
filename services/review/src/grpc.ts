import { Metadata, status, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { StoreInputError, type ApiKeyGrant, type FindingStateFilter, type ListRunsQuery, type ReviewQueries, type SpanBodies } from '@neatroots/store';

/** Trailing metadata of an INVALID_ARGUMENT reply: the store's error code (invalid_cursor, ...). */
export const INPUT_ERROR_CODE = 'neatroots-error-code';

/**
 * The review service over gRPC (neatroots.v1.Review), for the api and other services of the
 * distributed deployment. Replies carry the REST API's JSON body, computed here.
 */
export function reviewGrpcService(
  queries: ReviewQueries,
  resolveKey: (key: string) => Promise<ApiKeyGrant | null>,
): { service: typeof v1.ReviewService; implementation: UntypedServiceImplementation } {
  const unary =
    <Req, Res>(fn: (req: Req) => Promise<Res>) =>
    (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>) => {
      fn(call.request).then(
        (res) => cb(null, res),
        (err: unknown) => {
          if (err instanceof StoreInputError) {
            // the code travels too, so the api answers with the same error as in-process
            const metadata = new Metadata();
            metadata.set(INPUT_ERROR_CODE, err.code);
            cb({ code: status.INVALID_ARGUMENT, details: err.message, metadata });
          }
          else cb({ code: status.INTERNAL, details: `review: ${(err as Error)?.message ?? String(err)}` });
        },
      );
    };
  const reply = (v: unknown): v1.JsonReply => (v === null || v === undefined ? { found: false, json: '' } : { found: true, json: JSON.stringify(v) });
  const implementation: v1.ReviewServer = {
    listRuns: unary(async (r: v1.ListRunsRequest) =>
      reply(
        await queries.listRuns(r.project, {
          ...(r.workflow ? { workflow: r.workflow } : {}),
          ...(r.session_id ? { session_id: r.session_id } : {}),
          ...(r.end_status ? { end_status: r.end_status as ListRunsQuery['end_status'] } : {}),
          ...(r.has_open_findings !== undefined ? { has_open_findings: r.has_open_findings } : {}),
          ...(r.from ? { from: r.from } : {}),
          ...(r.to ? { to: r.to } : {}),
          ...(r.limit ? { limit: r.limit } : {}),
          ...(r.cursor ? { cursor: r.cursor } : {}),
        }),
      ),
    ),
    getRun: unary(async (r: v1.GetRunRequest) =>
      reply(
        await queries.getRun(r.project, r.run_id, {
          ...(r.spans_limit ? { spans_limit: r.spans_limit } : {}),
          ...(r.bodies ? { bodies: r.bodies as SpanBodies } : {}),
          ...(r.spans_since ? { since: r.spans_since } : {}),
        }),
      ),
    ),
    listSpans: unary(async (r: v1.ListSpansRequest) =>
      reply(
        await queries.listSpans(r.project, r.run_id, {
          ...(r.limit ? { limit: r.limit } : {}),
          ...(r.cursor ? { cursor: r.cursor } : {}),
          ...(r.bodies ? { bodies: r.bodies as SpanBodies } : {}),
        }),
      ),
    ),
    getSpan: unary(async (r: v1.GetSpanRequest) => reply(await queries.getSpan(r.project, r.run_id, r.span_id))),
    listFindings: unary(async (r: v1.ListFindingsRequest) =>
      reply(
        await queries.listFindings(r.project, {
          ...(r.state ? { state: r.state as FindingStateFilter } : {}),
          ...(r.run_id ? { run_id: r.run_id } : {}),
          ...(r.include_quiet !== undefined ? { include_quiet: r.include_quiet } : {}),
          ...(r.limit ? { limit: r.limit } : {}),
          ...(r.cursor ? { cursor: r.cursor } : {}),
        }),
      ),
    ),
    dismiss: unary(async (r: v1.FindingActionRequest) =>
      reply(await queries.dismiss(r.project, r.finding_id, { ...(r.by ? { by: r.by } : {}), ...(r.note ? { note: r.note } : {}) })),
    ),
    reopen: unary(async (r: v1.FindingActionRequest) => reply(await queries.reopen(r.project, r.finding_id))),
    checkStats: unary(async (r: v1.ProjectRequest) => reply(await queries.checkStats(r.project))),
    listDeadLetters: unary(async (r: v1.ListDeadLettersRequest) =>
      reply(await queries.listDeadLetters(r.project, { ...(r.limit ? { limit: r.limit } : {}), ...(r.cursor ? { cursor: r.cursor } : {}) })),
    ),
    resolveKey: unary(async (r: v1.ResolveKeyRequest) => {
      const grant = await resolveKey(r.key);
      return { project: grant?.project ?? '', scope: grant?.scope ?? '' };
    }),
  };
  return { service: v1.ReviewService, implementation };
}
