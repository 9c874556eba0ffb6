import { Metadata, status, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { asciiJson, SopError, type ListSessionsQuery, type ReleasesQuery, type ReviewSopQueries, type SopQueries } from '@neatroots/store';

/** Trailing metadata of a refusal: the error's code and, for does_not_compile, sopc's issues as JSON. */
export const SOP_ERROR_CODE = 'neatroots-error-code';
export const SOP_ERROR_ISSUES = 'neatroots-error-issues';
export const SOP_ERROR_ISSUES_OMITTED = 'neatroots-error-issues-omitted';

/** SopError's HTTP-like status as a gRPC code; the api maps it back (services/api sop-client). */
export const SOP_STATUS_TO_GRPC: Record<SopError['status'], status> = {
  400: status.INVALID_ARGUMENT,
  404: status.NOT_FOUND,
  409: status.ABORTED,
  422: status.FAILED_PRECONDITION,
  504: status.DEADLINE_EXCEEDED,
};

type Handler<Req> = (req: Req) => Promise<unknown>;

function unary<Req>(fn: Handler<Req>) {
  return (call: ServerUnaryCall<Req, unknown>, cb: sendUnaryData<unknown>) => {
    // A handler that throws before it returns a promise (the review side or GitHub connections
    // not served here) is answered as one that rejects: escaping, grpc-js answered it UNKNOWN,
    // and the api 500 where the same call in-process answers the SopError's status.
    Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (body) => cb(null, { found: true, json: JSON.stringify(body ?? null) }),
        (err: unknown) => {
          if (err instanceof SopError) {
            const metadata = new Metadata();
            metadata.set(SOP_ERROR_CODE, err.code);
            // a metadata value is printable ASCII (grpc-js throws on more, and the call then never ended)
            if (err.issues) metadata.set(SOP_ERROR_ISSUES, asciiJson(err.issues));
            if (err.issuesOmitted) metadata.set(SOP_ERROR_ISSUES_OMITTED, String(err.issuesOmitted));
            cb({ code: SOP_STATUS_TO_GRPC[err.status], details: err.message, metadata });
          } else {
            cb({ code: status.INTERNAL, details: `review (sop): ${(err as Error)?.message ?? String(err)}` });
          }
        },
      );
  };
}

type ReviewCall = { workspace: string; id: string; query_json: string; body_json: string };
const parsed = (text: string): Record<string, unknown> => (text ? (JSON.parse(text) as Record<string, unknown>) : {});

/** neatroots.v1.Sop over the SOP queries (and the review side's) of this process. */
export function sopGrpcService(q: SopQueries, r?: ReviewSopQueries): { service: typeof v1.SopService; implementation: UntypedServiceImplementation } {
  const review = (): ReviewSopQueries => {
    if (!r) throw new SopError(404, 'not_found', 'the review side is not served by this process');
    return r;
  };
  const implementation: UntypedServiceImplementation = {
    saveHeadFile: unary<{ workspace: string; path: string; text: string }>((r) => q.saveHeadFile(r.workspace, r.path, r.text)),
    deleteHeadFile: unary<{ workspace: string; path: string }>(async (r) => {
      await q.deleteHeadFile(r.workspace, r.path);
      return { path: r.path, deleted: true };
    }),
    pushHead: unary<{ workspace: string; files: { path: string; text: string }[] }>((r) => q.pushHead(r.workspace, r.files ?? [])),
    getHead: unary<{ workspace: string }>((r) => q.head(r.workspace)),
    getHeadFile: unary<{ workspace: string; path: string }>((r) => q.headFile(r.workspace, r.path)),
    publish: unary<{ workspace: string }>((r) => q.publish(r.workspace)),
    listReleases: unary<{ workspace: string; query_json: string }>((r) => q.releases(r.workspace, (r.query_json ? JSON.parse(r.query_json) : {}) as ReleasesQuery)),
    getRelease: unary<{ workspace: string; ref: string }>((r) => q.release(r.workspace, r.ref)),
    receiveSession: unary<{ workspace: string; session_json: string }>((r) => {
      let body: unknown;
      try {
        body = JSON.parse(r.session_json);
      } catch (err) {
        throw new SopError(400, 'invalid_body', `the session is not valid JSON: ${(err as Error).message}`);
      }
      return q.receiveSession(r.workspace, body);
    }),
    getSession: unary<{ workspace: string; id: string }>((r) => q.getSession(r.workspace, r.id)),
    getSessionTranscript: unary<{ workspace: string; id: string }>((r) => q.getSessionTranscript(r.workspace, r.id)),
    listSessions: unary<{ workspace: string; query_json: string }>((r) => q.listSessions(r.workspace, (r.query_json ? JSON.parse(r.query_json) : {}) as ListSessionsQuery)),
    recheckSession: unary<{ workspace: string; id: string }>((r) => q.recheckSession(r.workspace, r.id)),
  };
  // The api validated the query and body; the service validates bodies again (both transports refuse the same things).
  Object.assign(implementation, {
    reviewQueue: unary<ReviewCall>((c) => review().reviewQueue(c.workspace, parsed(c.query_json))),
    listPatterns: unary<ReviewCall>((c) => review().patterns(c.workspace, parsed(c.query_json))),
    getPattern: unary<ReviewCall>((c) => review().pattern(c.workspace, c.id, parsed(c.query_json))),
    giveVerdict: unary<ReviewCall>((c) => review().giveVerdict(c.workspace, c.id, parsed(c.body_json) as never)),
    overrideFinding: unary<ReviewCall>((c) => review().overrideFinding(c.workspace, c.id, parsed(c.body_json) as never)),
    regression: unary<ReviewCall>((c) => review().regression(c.workspace, c.id)),
    insights: unary<ReviewCall>((c) => review().insights(c.workspace, parsed(c.query_json))),
    compareReleases: unary<ReviewCall>((c) => review().compareReleases(c.workspace, parsed(c.query_json))),
    renamePatterns: unary<ReviewCall>((c) => review().renamePatterns(c.workspace, parsed(c.body_json) as never)),
    calibrate: unary<ReviewCall>((c) => review().calibrate(c.workspace, parsed(c.body_json) as never)),
    getRuleLineage: unary<ReviewCall>((c) => review().ruleLineage(c.workspace, c.id, parsed(c.query_json))),
    linkRuleLineage: unary<ReviewCall>((c) => review().linkRule(c.workspace, c.id, parsed(c.body_json) as never)),
    unlinkRuleLineage: unary<ReviewCall>((c) => review().unlinkRule(c.workspace, c.id, parsed(c.query_json))),
    rebuildLineage: unary<ReviewCall>((c) => review().rebuildLineage(c.workspace)),
    recluster: unary<ReviewCall>((c) => review().recluster(c.workspace, parsed(c.body_json) as never)),
  });
  // Suggestions and the GitHub repo connection (id: the pattern for suggest, else the suggestion).
  Object.assign(implementation, {
    suggest: unary<ReviewCall>((c) => review().suggest(c.workspace, c.id, parsed(c.body_json))),
    listSuggestions: unary<ReviewCall>((c) => review().listSuggestions(c.workspace, parsed(c.query_json))),
    getSuggestion: unary<ReviewCall>((c) => review().getSuggestion(c.workspace, c.id)),
    applySuggestion: unary<ReviewCall>((c) => review().applySuggestion(c.workspace, c.id, parsed(c.body_json))),
    rewriteSuggestion: unary<ReviewCall>((c) => review().rewriteSuggestion(c.workspace, c.id, parsed(c.body_json))),
    dismissSuggestion: unary<ReviewCall>((c) => review().dismissSuggestion(c.workspace, c.id, parsed(c.body_json))),
    getRepoConnection: unary<ReviewCall>((c) => review().getRepoConnection(c.workspace)),
    putRepoConnection: unary<ReviewCall>((c) => review().putRepoConnection(c.workspace, c.body_json ? JSON.parse(c.body_json) : undefined)),
    deleteRepoConnection: unary<ReviewCall>((c) => review().deleteRepoConnection(c.workspace)),
  });
  return { service: v1.SopService, implementation };
}
