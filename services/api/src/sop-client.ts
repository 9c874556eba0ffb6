import { credentials, Metadata, status, type ServiceError, type ClientOptions } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { SopError, type ReviewSopQueries, type SopIssue, type SopQueries } from '@neatroots/store';
import { unavailable } from './errors';
import { REVIEW_REPLY_BYTES } from './review-client';

/** Where the review service puts a refusal's code and sopc's issues (services/review sop/grpc.ts). */
const ERROR_CODE = 'neatroots-error-code';
const ERROR_ISSUES = 'neatroots-error-issues';
const ERROR_ISSUES_OMITTED = 'neatroots-error-issues-omitted';
/** How long a recluster may take (the review service's job waits 10 minutes for it). */
const RECLUSTER_TIMEOUT_MS = 11 * 60_000;
const FROM_GRPC: Partial<Record<status, SopError['status']>> = {
  [status.INVALID_ARGUMENT]: 400,
  [status.NOT_FOUND]: 404,
  [status.ABORTED]: 409,
  [status.FAILED_PRECONDITION]: 422,
  // the review service's job outlived its wait (with its code), or this call's own deadline passed
  [status.DEADLINE_EXCEEDED]: 504,
};

/**
 * The SOP queries over gRPC (neatroots.v1.Sop): what the api uses in the distributed
 * deployment. A refusal comes back as the same SopError the in-process call throws, so the
 * REST answer (status, code, message, issues) is the same in both deployments.
 */
export class SopGrpcClient implements SopQueries, ReviewSopQueries {
  private readonly client: v1.SopClient;

  constructor(address: string, private readonly timeoutMs = 30_000, clientOptions: ClientOptions = {}) {
    // A session's transcript or a release read whole can pass grpc-js's default 4 MiB.
    this.client = new v1.SopClient(address, credentials.createInsecure(), { 'grpc.max_receive_message_length': REVIEW_REPLY_BYTES, ...clientOptions });
  }

  private async call<Req, T>(method: unknown, req: Req, timeoutMs = this.timeoutMs): Promise<T> {
    const reply = await new Promise<v1.JsonReply>((resolve, reject) => {
      (method as (r: Req, md: Metadata, o: { deadline: Date }, cb: (e: ServiceError | null, r: v1.JsonReply) => void) => unknown).call(
        this.client,
        req,
        new Metadata(),
        { deadline: new Date(Date.now() + timeoutMs) },
        (err, res) => {
          if (!err) return resolve(res);
          const mapped = FROM_GRPC[err.code as status];
          if (!mapped) return reject(unavailable(err, 'review', timeoutMs) ?? new Error(`review service: ${err.details || err.message}`));
          const code = String(err.metadata?.get(ERROR_CODE)[0] ?? 'error');
          const issuesText = err.metadata?.get(ERROR_ISSUES)[0];
          const issues = issuesText ? (JSON.parse(String(issuesText)) as SopIssue[]) : undefined;
          const omitted = Number(err.metadata?.get(ERROR_ISSUES_OMITTED)[0] ?? 0) || undefined;
          reject(new SopError(mapped, code, err.details, issues, omitted));
        },
      );
    });
    return JSON.parse(reply.json) as T;
  }

  saveHeadFile: SopQueries['saveHeadFile'] = (workspace, path, text) => this.call(this.client.saveHeadFile, { workspace, path, text });
  deleteHeadFile: SopQueries['deleteHeadFile'] = async (workspace, path) => {
    await this.call(this.client.deleteHeadFile, { workspace, path, text: '' });
  };
  pushHead: SopQueries['pushHead'] = (workspace, files) => this.call(this.client.pushHead, { workspace, files });
  head: SopQueries['head'] = (workspace) => this.call(this.client.getHead, { workspace });
  headFile: SopQueries['headFile'] = (workspace, path) => this.call(this.client.getHeadFile, { workspace, path, text: '' });
  publish: SopQueries['publish'] = (workspace) => this.call(this.client.publish, { workspace });
  releases: SopQueries['releases'] = (workspace, q) => this.call(this.client.listReleases, { workspace, query_json: q ? JSON.stringify(q) : '' });
  release: SopQueries['release'] = (workspace, ref) => this.call(this.client.getRelease, { workspace, ref });
  receiveSession: SopQueries['receiveSession'] = (workspace, session) => this.call(this.client.receiveSession, { workspace, session_json: JSON.stringify(session) });
  getSession: SopQueries['getSession'] = (workspace, id) => this.call(this.client.getSession, { workspace, id });
  getSessionTranscript: SopQueries['getSessionTranscript'] = (workspace, id) => this.call(this.client.getSessionTranscript, { workspace, id });
  listSessions: SopQueries['listSessions'] = (workspace, q) => this.call(this.client.listSessions, { workspace, query_json: JSON.stringify(q) });
  recheckSession: SopQueries['recheckSession'] = (workspace, id) => this.call(this.client.recheckSession, { workspace, id });

  private review<T>(method: unknown, workspace: string, id: string, query: unknown, body?: unknown, timeoutMs?: number): Promise<T> {
    return this.call(method, { workspace, id, query_json: JSON.stringify(query ?? {}), body_json: body === undefined ? '' : JSON.stringify(body) }, timeoutMs);
  }

  reviewQueue: ReviewSopQueries['reviewQueue'] = (ws, q) => this.review(this.client.reviewQueue, ws, '', q);
  patterns: ReviewSopQueries['patterns'] = (ws, q) => this.review(this.client.listPatterns, ws, '', q);
  pattern: ReviewSopQueries['pattern'] = (ws, id, q) => this.review(this.client.getPattern, ws, id, q);
  giveVerdict: ReviewSopQueries['giveVerdict'] = (ws, id, input) => this.review(this.client.giveVerdict, ws, id, {}, input);
  overrideFinding: ReviewSopQueries['overrideFinding'] = (ws, id, input) => this.review(this.client.overrideFinding, ws, id, {}, input);
  regression: ReviewSopQueries['regression'] = (ws, id) => this.review(this.client.regression, ws, id, {});
  insights: ReviewSopQueries['insights'] = (ws, q) => this.review(this.client.insights, ws, '', q);
  compareReleases: ReviewSopQueries['compareReleases'] = (ws, q) => this.review(this.client.compareReleases, ws, '', q);
  renamePatterns: ReviewSopQueries['renamePatterns'] = (ws, input) => this.review(this.client.renamePatterns, ws, '', {}, input);
  /** The review service waits up to 25 s for the sopops_calibrate job, inside this call's deadline. */
  calibrate: ReviewSopQueries['calibrate'] = (ws, input) => this.review(this.client.calibrate, ws, '', {}, input);
  /** Calls the models synchronously: waits as long as the review service's job may take. */
  recluster: ReviewSopQueries['recluster'] = (ws, input) => this.review(this.client.recluster, ws, '', {}, input, RECLUSTER_TIMEOUT_MS);

  ruleLineage: ReviewSopQueries['ruleLineage'] = (ws, id, q) => this.review(this.client.getRuleLineage, ws, id, q);
  linkRule: ReviewSopQueries['linkRule'] = (ws, id, input) => this.review(this.client.linkRuleLineage, ws, id, {}, input);
  unlinkRule: ReviewSopQueries['unlinkRule'] = (ws, id, q) => this.review(this.client.unlinkRuleLineage, ws, id, q);
  rebuildLineage: ReviewSopQueries['rebuildLineage'] = (ws) => this.review(this.client.rebuildLineage, ws, '', {});

  suggest: ReviewSopQueries['suggest'] = (ws, id, input) => this.review(this.client.suggest, ws, id, {}, input ?? {});
  listSuggestions: ReviewSopQueries['listSuggestions'] = (ws, q) => this.review(this.client.listSuggestions, ws, '', q);
  getSuggestion: ReviewSopQueries['getSuggestion'] = (ws, id) => this.review(this.client.getSuggestion, ws, id, {});
  applySuggestion: ReviewSopQueries['applySuggestion'] = (ws, id, input) => this.review(this.client.applySuggestion, ws, id, {}, input ?? {});
  rewriteSuggestion: ReviewSopQueries['rewriteSuggestion'] = (ws, id, input) => this.review(this.client.rewriteSuggestion, ws, id, {}, input ?? {});
  dismissSuggestion: ReviewSopQueries['dismissSuggestion'] = (ws, id, input) => this.review(this.client.dismissSuggestion, ws, id, {}, input ?? {});
  getRepoConnection: ReviewSopQueries['getRepoConnection'] = (ws) => this.review(this.client.getRepoConnection, ws, '', {});
  putRepoConnection: ReviewSopQueries['putRepoConnection'] = (ws, body) => this.review(this.client.putRepoConnection, ws, '', {}, body ?? null);
  deleteRepoConnection: ReviewSopQueries['deleteRepoConnection'] = (ws) => this.review(this.client.deleteRepoConnection, ws, '', {});

  close(): void {
    this.client.close();
  }
}
