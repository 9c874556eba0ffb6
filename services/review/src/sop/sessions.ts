import type { Db, JobInfo, Jobs } from '@neatroots/ports';
import { parseSession, SessionError, UnknownAgentError, type DecisionRecord, type Lock, type ModelFailure, type ProcedureCheck, type QuestionBands, type Session, type SessionBody } from '@neatroots/sop';
import { SopError, SopSessionsRepo, type CheckRead, sopFindingId, StoreInputError, type ListSessionsQuery, type SessionsListView, type SessionSummaryRecord, type SessionTranscriptView, type SessionView, type StoredFinding } from '@neatroots/store';
import type { SopWorkspaces } from './workspaces';

/**
 * A check's tries: 2 s, 4 s, ... 32 s apart (about a minute in all). A try fails when the
 * question service cannot be reached, and when the model failed on some question for a passing
 * reason (a server error, a rate limit, a timeout, an unreadable answer). Tries used up, the
 * session is marked failed, but for the model's failures: the last try saves what was decided,
 * those rules not_checked, and the session is checked with an `error` saying so.
 */
export const CHECK_RETRY = { attempts: 6, backoffMs: 2000 };

/** The BullMQ queue (the seed's Hatchet workflow) that checks one session. */
export const SOP_CHECK_QUEUE = 'sopops_check';
/** Replicas whose requeue passes start in the same window of this length queue a session once (SopSessions.requeue). */
export const REQUEUE_WINDOW_MS = 10 * 60_000;

/** Sessions one process checks at once unless told otherwise. */
export const SOP_CHECK_CONCURRENCY = 16;

/**
 * How long a session's check holds its session (BullMQ) if the replica running it dies: the
 * check of a session is never run twice at once (SopSessions.start), and the one a dead replica
 * held waits this long at most once BullMQ gives it to another, not the driver's 10 minutes.
 */
export const SOP_CHECK_HOLD_MS = 60_000;

/**
 * Bytes of transcript (as sent, JSON) one process checks at once unless told otherwise: a check
 * holds its session's transcript read, parsed, and cut into the prompts asked of it, several
 * times its size, so sixteen long sessions (3.2 MB each) at once took the embedded process past
 * ingest's memory ceiling. Short sessions keep their concurrency (sixteen of 35 KB are half a
 * megabyte); long ones are checked a few at a time, and one longer than this alone.
 */
export const SOP_CHECK_BYTES = 16 * 1024 * 1024;

/** Checks a session against a release's procedures (the checker of @neatroots/sop, with its models). */
export type CheckSession = (args: {
  lock: Lock;
  releaseId: string;
  session: Session;
  /** The workspace's bands fitted by calibration. */
  bands?: QuestionBands;
  /** Each rule question's decision: kept in the check's stored body (`decisions`), where calibration reads it. */
  onDecision?: (d: DecisionRecord) => void;
  /** Each question the model failed to answer for a passing reason: the check is tried again. */
  onModelFailure?: (f: ModelFailure) => void;
  /** Aborted when a stop cuts the check's job short (JobInfo.signal): it asks nothing more and rejects. */
  signal?: AbortSignal;
}) => Promise<SessionBody>;

/** Where a check finds the workspace's bands fitted by calibration (services/review/src/calibration). */
export interface FittedBands {
  bandsOf(workspace: string): Promise<QuestionBands>;
}

export interface SopCheckJob {
  workspace: string;
  session_id: string;
  content_hash: string;
  /**
   * The transcript's size as sent (JSON characters), when the job was queued as it arrived: room
   * for it is waited for before it is read. Without it (a recheck, a requeue, a job queued by an
   * older version), its size is known once it is read.
   */
  bytes?: number;
}

/**
 * What the review side adds to sessions (patterns, suppression, the roll-up): told when a
 * check was saved, and asked to fill in what a session's GET shows of it (each rule's
 * pattern_id, suppressed, override). Optional: without it sessions are served as checked.
 */
export interface SessionReviewHooks {
  onChecked(workspace: string, sessionId: string): Promise<void>;
  overlay(workspace: string, view: SessionView): Promise<SessionView>;
}

/**
 * Sessions in, results out. A session is stored as sent and checked by a job (BullMQ
 * distributed, inline embedded), keyed by its content, so a re-sent session writes nothing
 * (but one that failed is queued and checked again), a job run twice writes the same rows,
 * and a check of content since replaced writes nothing.
 */
export class SopSessions {
  private readonly repo: SopSessionsRepo;
  private review: SessionReviewHooks | null = null;
  private bands: FittedBands | null = null;
  private budget = new ByteBudget(SOP_CHECK_BYTES);

  constructor(
    db: Db,
    private readonly workspaces: SopWorkspaces,
    private readonly jobs: Jobs,
    private readonly checkSession: CheckSession,
    private readonly retry: { attempts: number; backoffMs: number } = CHECK_RETRY,
  ) {
    this.repo = new SopSessionsRepo(db);
  }

  /**
   * Registers the check job's handler and queues again what a stop left queued. Sixteen at
   * once by default: the jobs that run together share their reads and writes (the repository
   * coalesces them into multi-row statements), and a check waiting on a model holds no
   * connection. Never two of one session at once, in any replica: a session sent again, or
   * re-checked, while it is still queued queues its check again (its first job may be lost),
   * and a requeue at a start queues one beside a job still waiting; such a job waits for the
   * check under way, then finds the session checked and asks the model nothing.
   */
  async start(opts: { concurrency?: number; bytes?: number } = {}): Promise<void> {
    this.budget = new ByteBudget(opts.bytes ?? SOP_CHECK_BYTES);
    await this.jobs.work<SopCheckJob>(SOP_CHECK_QUEUE, (job, info) => this.runCheck(job, info), {
      concurrency: opts.concurrency ?? SOP_CHECK_CONCURRENCY,
      serializeBy: (job) => job.session_id,
      serializeLockMs: SOP_CHECK_HOLD_MS,
      // The job failed for good: its tries used up (a model service away for minutes), or the
      // process running it died mid-check too often (BullMQ fails it without a last try). Say
      // why on the session rather than leave it queued for good. Sending it again queues it again.
      onFailed: (job, failed) => this.repo.markFailed(job.session_id, job.content_hash, `not checked after ${failed.attempts} ${failed.attempts === 1 ? 'try' : 'tries'}: ${failed.reason}`),
    });
    await this.requeue();
  }

  /**
   * Queues again every session a stop left queued, a page at a time. The job's id follows from
   * the session, its content and the REQUEUE_WINDOW_MS window the pass starts in, so replicas
   * starting together queue each one once (a driver keeps one job per id), while a later start
   * queues it anew: a job kept under an earlier pass's id (one that failed while its session
   * could not be marked failed) does not make every later requeue a no-op. A session queued
   * twice is checked once (the second job finds it checked).
   */
  async requeue(pageSize = 1000, now = Date.now()): Promise<number> {
    const pass = Math.floor(now / REQUEUE_WINDOW_MS).toString(36);
    let n = 0;
    for (let after: string | undefined; ; ) {
      const page = await this.repo.queued(pageSize, after);
      for (const s of page) {
        const job = { workspace: s.workspace, session_id: s.id, content_hash: s.content_hash };
        await this.jobs.add(SOP_CHECK_QUEUE, job, { jobId: `${s.id}.${s.content_hash.slice(0, 16)}.requeued.${pass}`, attempts: this.retry.attempts, backoffMs: this.retry.backoffMs });
      }
      n += page.length;
      if (page.length < pageSize) return n;
      after = page[page.length - 1].id;
    }
  }

  /**
   * POST /v1/workspaces/{ws}/sessions: 202 {id, external_id, status}: `queued` for new or
   * changed content, for the same content of a session that failed or was checked while the
   * model failed (checked again), and for one still queued (its check queued again: a job lost
   * to a Redis blip or a crash is not waited for until a restart); `unchanged` otherwise.
   */
  async receive(workspace: string, raw: unknown, opts: { runId?: string } = {}): Promise<{ id: string; external_id: string; status: 'queued' | 'unchanged' }> {
    let s: Session;
    try {
      s = parseSession(raw);
    } catch (err) {
      if (err instanceof SessionError) throw new SopError(400, 'invalid_session', err.message);
      throw err;
    }
    if (!s.external_id) throw new SopError(400, 'invalid_session', 'external_id: required (it makes re-sending a session idempotent)');
    if (!s.agent) throw new SopError(400, 'invalid_session', 'agent: required (the session is checked against the procedures its agent lists)');
    const release_id = await this.releaseNamed(workspace, s.release_id);
    const r = await this.repo.receive(workspace, { ...s, external_id: s.external_id, agent: s.agent, release_id, tool_calls: s.tool_calls.map((c) => ({ ...c, error: errorText(c.error) })) }, opts);
    if (r.status === 'queued') await this.enqueue({ workspace, session_id: r.id, content_hash: r.content_hash, bytes: r.bytes });
    return { id: r.id, external_id: s.external_id, status: r.status };
  }

  /**
   * POST /v1/workspaces/{ws}/sessions/{id}/recheck: 202 {id, external_id, status: queued}: the
   * session as stored is checked again (on the release it names, or the one live now), its
   * results replaced; one still queued has its check queued again. For sessions nobody can send
   * again (made from runs), and any other once the model is back or its settings changed. 404
   * for no such session; 409 `transcript_expired` once retention emptied its transcript.
   */
  async recheck(workspace: string, id: string): Promise<{ id: string; external_id: string; status: 'queued' }> {
    const r = await this.repo.recheck(workspace, id);
    if (!r) throw new SopError(404, 'not_found', `no session ${id} in workspace ${workspace}`);
    if (r === 'transcript_expired') {
      throw new SopError(409, 'transcript_expired', `session ${id}'s transcript was let go (NEATROOTS_TRANSCRIPT_RETENTION_DAYS): there is nothing to check; send the session again to check it`);
    }
    await this.enqueue({ workspace, session_id: r.id, content_hash: r.content_hash });
    return { id: r.id, external_id: r.external_id, status: r.status };
  }

  async get(workspace: string, id: string): Promise<SessionView> {
    const got = await this.repo.get(workspace, id);
    if (!got) throw new SopError(404, 'not_found', `no session ${id} in workspace ${workspace}`);
    // The stored columns hold the results rolled up after verdicts and overrides; the body, the checker's.
    const view: SessionView = {
      ...summary(got.session),
      // The decisions kept for calibration are not part of the check as the API shows it.
      checks: got.checks.map(({ body: { decisions: _kept, ...check }, ...c }) => ({ ...(check as unknown as ProcedureCheck), result: c.result, checked_result: c.checked_result })),
    };
    return this.review ? this.review.overlay(workspace, view) : view;
  }

  /** The session as received: its turns (numbered, as evidence's `turn` counts them) and tool calls. */
  async transcript(workspace: string, id: string): Promise<SessionTranscriptView> {
    const got = await this.repo.body(workspace, id);
    if (!got) throw new SopError(404, 'not_found', `no session ${id} in workspace ${workspace}`);
    return {
      id,
      external_id: got.external_id,
      turns: (got.body.turns ?? []).map((t, index) => ({ index, ...t })),
      tool_calls: got.body.tool_calls ?? [],
      transcript_expired_at: got.transcript_expired_at,
    };
  }

  /** Plugs in the review side (patterns, suppression); see SessionReviewHooks. */
  useCalibration(bands: FittedBands): void {
    this.bands = bands;
  }

  useReview(hooks: SessionReviewHooks): void {
    this.review = hooks;
  }

  async list(workspace: string, q: ListSessionsQuery): Promise<SessionsListView> {
    try {
      const page = await this.repo.list(workspace, q);
      return { items: page.items.map(summary), next_cursor: page.next_cursor };
    } catch (err) {
      if (err instanceof StoreInputError) throw new SopError(400, err.code, err.message);
      throw err;
    }
  }

  /**
   * The job: check the session's current content on its release, then store the outcome. A try
   * on which the model failed for a passing reason fails (the job tries again later: answers
   * given are cached, only the failed questions are asked again), unless it is the last
   * (`info` absent: called directly): then the outcome is saved with those rules not_checked
   * and the session's `error` says so, and sending it again or re-checking it checks it again.
   */
  async runCheck(job: SopCheckJob, info?: JobInfo): Promise<void> {
    // Transcripts held by checks at once are bounded (SOP_CHECK_BYTES): room for this one is
    // waited for before it is read when its size came with the job, else once it is read.
    const known = typeof job.bytes === 'number' && job.bytes >= 0;
    let held = 0;
    try {
      if (known) await this.budget.acquire((held = job.bytes!));
      // One read: the session without its checks, with the live release's id as of now.
      const got = await this.repo.forCheck(job.workspace, job.session_id);
      // Gone, re-sent with other content (its own job checks that), or already checked.
      if (!got || got.session.content_hash !== job.content_hash || got.session.status === 'checked') return;
      if (!known) await this.budget.acquire((held = got.bytes));
      await this.check(job, got, info);
    } finally {
      this.budget.release(held);
    }
  }

  /** What the budget of transcript bytes held by checks holds now, the most it held, and its bound. */
  checkBytes(): { held: number; peak: number; limit: number; waiting: number } {
    return this.budget.stats();
  }

  private async check(job: SopCheckJob, got: CheckRead, info?: JobInfo): Promise<void> {
    const session = got.session;
    const ref = session.release_asked ?? 'live';
    const release = await this.workspaces.releaseForCheck(job.workspace, ref === 'live' ? got.live_release_id : ref);
    if (!release) {
      const why = ref === 'live' ? `workspace ${job.workspace} has no live release yet: publish one, then send the session again` : `release ${ref} does not exist in workspace ${job.workspace}`;
      await this.repo.markFailed(session.id, session.content_hash, why);
      return;
    }
    let body: SessionBody;
    const decisions: DecisionRecord[] = [];
    const failures: ModelFailure[] = [];
    try {
      const bands = this.bands ? await this.bands.bandsOf(job.workspace) : undefined;
      body = await this.checkSession({
        lock: release.lock,
        releaseId: release.id,
        session: parseSession(session.body),
        bands,
        onDecision: (d) => decisions.push(d),
        onModelFailure: (f) => failures.push(f),
        signal: info?.signal,
      });
    } catch (err) {
      // Trying again cannot help: the release has no such agent. Anything else (a model
      // service away) fails the attempt and the job is tried again.
      if (!(err instanceof UnknownAgentError)) throw err;
      await this.repo.markFailed(session.id, session.content_hash, `release ${release.number}: ${err.message}`);
      return;
    }
    if (failures.length && info && info.attempt < this.retry.attempts) {
      throw new Error(`the model failed on ${plural(failures.length, 'question')} (try ${info.attempt} of ${this.retry.attempts}): ${failures[0].reason.replace(/^Not checked: /, '')}`);
    }
    const findings: StoredFinding[] = [];
    for (const check of body.checks) {
      for (const rule of check.rules) {
        if (!rule.finding) continue;
        const id = sopFindingId(session.id, check.procedure_id, rule.rule_id);
        rule.finding_id = id;
        findings.push({
          id,
          procedure_id: check.procedure_id,
          rule_id: rule.rule_id,
          kind: rule.kind,
          index: rule.index,
          text: rule.text,
          status: rule.status as StoredFinding['status'],
          evidence: rule.evidence,
          reason: rule.reason,
        });
      }
    }
    const wrote = await this.repo.saveOutcome(session.id, session.content_hash, {
      release_id: release.id,
      result: body.result,
      checked_result: body.result,
      checks: body.checks.map((c) => ({ procedure_id: c.procedure_id, result: c.result, checked_result: c.checked_result, body: withDecisions(c, decisions) })),
      findings,
      error: failures.length ? modelFailedError(session.id, failures) : null,
    });
    // Its findings go into patterns next (the sopops_patterns job), then suppression and the roll-up.
    if (wrote && this.review) await this.review.onChecked(job.workspace, session.id);
  }

  /**
   * The release a session names, as its content is compared and kept: its number ("1"), whether
   * it was named by its id, its number, or its number as a string, so a re-send naming the same
   * release another way is the same content (`unchanged`). A release that does not exist (yet)
   * is kept as named, and so are "live" and null (the release live when it is checked).
   */
  private async releaseNamed(workspace: string, ref: string | null): Promise<string | null> {
    if (ref === null || ref === 'live') return ref;
    const release = await this.workspaces.releaseForCheck(workspace, ref);
    return release ? String(release.number) : ref;
  }

  private async enqueue(job: SopCheckJob): Promise<void> {
    // One job per time content arrives. Not per content alone: content A, then B, then A
    // again must be checked a third time, and a driver remembers finished ids. Running twice
    // is harmless (runCheck writes nothing for checked or replaced content).
    const jobId = `${job.session_id}.${job.content_hash.slice(0, 16)}.${Date.now().toString(36)}`;
    await this.jobs.add(SOP_CHECK_QUEUE, job, { jobId, attempts: this.retry.attempts, backoffMs: this.retry.backoffMs });
  }

}

/**
 * A checked session's `error` when the model failed on some of its questions: how many, the
 * first's reason, and what to do. Sending the session again, or re-checking it, asks again.
 */
function modelFailedError(sessionId: string, failures: readonly ModelFailure[]): string {
  const first = failures[0].reason.replace(/^Not checked: /, '').replace(/\.$/, '');
  const n = failures.length;
  const why = `${first}${n > 1 ? `; and ${n - 1} more` : ''}`;
  return `the model failed on ${plural(n, 'question')} (${why}), so ${n === 1 ? 'its rule is' : 'their rules are'} not checked: send the session again, or POST …/sessions/${sessionId}/recheck, once the model is back`;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** The check as stored: the checker's body, with its rule questions' decisions when a model made any. */
function withDecisions(c: ProcedureCheck, all: readonly DecisionRecord[]): Record<string, unknown> {
  const mine = all.filter((d) => d.procedure_id === c.procedure_id).map(({ rule_id, field, p, sure }) => ({ rule_id, field, p, sure }));
  return mine.length ? { ...c, decisions: mine } : (c as unknown as Record<string, unknown>);
}

function errorText(e: unknown): string | null {
  if (e === null || e === undefined) return null;
  return typeof e === 'string' ? e : JSON.stringify(e);
}

/** What a session's GET and the list show of its record (never its body: the list does not read it). */
function summary(s: SessionSummaryRecord): Omit<SessionView, 'checks'> {
  return {
    id: s.id,
    external_id: s.external_id,
    agent: s.agent,
    release_id: s.release_id,
    status: s.status,
    result: s.result,
    checked_result: s.checked_result,
    started_at: s.started_at,
    transcript_ref: s.transcript_ref,
    received_at: s.received_at,
    checked_at: s.checked_at,
    error: s.error,
  };
}

/**
 * Bytes held at once, up to `limit`: an acquire waits until its bytes fit (one alone always
 * fits, whatever its size), in the order asked, so a long session is not passed over for good by
 * short ones.
 */
class ByteBudget {
  private held = 0;
  private peak = 0;
  private readonly waiting: { bytes: number; go: () => void }[] = [];

  constructor(private readonly limit: number) {}

  acquire(bytes: number): Promise<void> {
    if (!this.waiting.length && this.fits(bytes)) {
      this.take(bytes);
      return Promise.resolve();
    }
    return new Promise((go) => this.waiting.push({ bytes, go }));
  }

  release(bytes: number): void {
    this.held -= bytes;
    while (this.waiting.length && this.fits(this.waiting[0].bytes)) {
      const next = this.waiting.shift()!;
      this.take(next.bytes);
      next.go();
    }
  }

  stats(): { held: number; peak: number; limit: number; waiting: number } {
    return { held: this.held, peak: this.peak, limit: this.limit, waiting: this.waiting.length };
  }

  private fits(bytes: number): boolean {
    return this.held === 0 || this.held + bytes <= this.limit;
  }

  private take(bytes: number): void {
    this.held += bytes;
    this.peak = Math.max(this.peak, this.held);
  }
}
