import { AuthoringError, type Author, type Authoring, type CheckSubmission, type ListedCheck, type SavedCheck } from '@neatroots/api';
import { appliesInProject, CheckError, isRuleCheck, parseDatabaseCheck, type Check, type CheckEntry, type LoadResult } from '@neatroots/checks';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { ModelConfig } from '@neatroots/platform';
import { ModelError, type ModelErrorKind } from '@neatroots/ports';
import { NoModelError, QueueFullError, type Draft, type DraftRequest } from '@neatroots/questions';
import { AgentChecksFullError, agentChecksFull, type DbCheckInput, type DbCheckRecord, type ReviewQueries } from '@neatroots/store';
import { DEFAULT_PREVIEW_MODEL_CALLS, DEFAULT_PREVIEW_MS, DEFAULT_PREVIEW_RUNS, previewCheck } from './preview';
import { invalid, parseSubmission, withAction, type Submitted } from './submission';

/**
 * The authoring side the api serves (issue 14), over the services of this process: review
 * keeps the database checks, the question service drafts, replay previews, and the check set
 * is reloaded after each change so a saved check takes effect in the rule engine as a file
 * does (other processes read the database checks again within seconds: runtime.ts).
 */
export interface AuthoringDeps {
  /** The project's database checks as review stores them. */
  data: {
    checkRecords(project: string): Promise<DbCheckRecord[]>;
    putCheck(c: DbCheckInput): Promise<void>;
    deleteCheck(project: string, id: string): Promise<boolean>;
  };
  queries: ReviewQueries;
  /** The checks in effect in this process, and reading them again. */
  checks: { loaded(): LoadResult; reload(): Promise<void> };
  /** The question service's drafter; absent: not reachable from this process. */
  draft?: (req: DraftRequest) => Promise<Draft>;
  models?: ModelConfig;
  steering?: (project: string) => Promise<boolean>;
  /** Previews running at once in this process (default MAX_PREVIEWS_AT_ONCE). */
  previewsAtOnce?: number;
  /**
   * Checks coding agents may have saved in a project (NEATROOTS_MAX_AGENT_CHECKS; default
   * DEFAULT_MAX_AGENT_CHECKS; 0: no bound). People's saves are not counted nor bounded.
   */
  maxAgentChecks?: number;
}

/**
 * Previews running at once in a process, the REST endpoint and the MCP tool together: each
 * replays runs and may make up to 200 model calls, so a burst of them could take every model
 * call the process has from the live question checks. One past the bound is refused (429
 * too_many_previews), not queued: a person retries in a moment, an agent's tool call says why.
 */
export const MAX_PREVIEWS_AT_ONCE = 2;

/**
 * Database checks a project may hold that coding agents saved (MCP create_check): every check
 * runs on every span of the project, and an agent in a loop could save hundreds. A new one past
 * the bound is refused (409 too_many_checks, a tool error over MCP); replacing one it saved is
 * not. The setting is NEATROOTS_MAX_AGENT_CHECKS.
 */
export const DEFAULT_MAX_AGENT_CHECKS = 100;

function listed(c: Check, overrides: CheckEntry['overrides'], rec?: DbCheckRecord): ListedCheck {
  return {
    id: c.id,
    kind: c.kind,
    action: c.action,
    title: c.title,
    source: c.source,
    ...(c.file ? { file: c.file } : {}),
    ...(rec ? { origin: rec.origin, saved: rec.saved, yaml: rec.yaml, updated_at: rec.updated_at } : {}),
    overrides,
    in_effect: true,
  };
}

/** A stored check that is not in effect: it does not load, or one of your halt rules wins. */
function notInEffect(rec: DbCheckRecord): ListedCheck {
  let error: string | undefined;
  let check: Check | undefined;
  try {
    check = parseDatabaseCheck({ id: rec.id, yaml: rec.yaml, origin: rec.origin });
  } catch (e) {
    error = e instanceof CheckError ? e.message : String(e);
  }
  return {
    id: rec.id,
    ...(check ? { kind: check.kind, action: check.action, title: check.title } : {}),
    source: 'database',
    origin: rec.origin,
    saved: rec.saved,
    yaml: rec.yaml,
    updated_at: rec.updated_at,
    in_effect: false,
    error: error ?? 'a halt rule of yours with the same id is in effect instead',
  };
}

/** The loader's entries follow its checks one for one (libs/checks sources.ts resolve). */
function overridesOf(r: LoadResult): Map<Check, CheckEntry['overrides']> {
  return new Map(r.checks.map((c, i) => [c, r.entries[i]?.overrides ?? []]));
}

const WHO: Record<string, string> = { agent: 'a coding agent', planner: 'the planner', app: 'a person (the app)', cli: 'a person (the CLI)' };

export function createAuthoring(deps: AuthoringDeps): Authoring {
  const previewsAtOnce = deps.previewsAtOnce ?? MAX_PREVIEWS_AT_ONCE;
  const maxAgentChecks = deps.maxAgentChecks ?? DEFAULT_MAX_AGENT_CHECKS;
  let previewing = 0;
  const tooManyAgentChecks = (project: string, agents: number) =>
    new AuthoringError(
      409,
      'too_many_checks',
      `project ${project} has ${agents} checks saved by coding agents, the most allowed (NEATROOTS_MAX_AGENT_CHECKS=${maxAgentChecks}): replace one of them (save a check with its id), ` +
        `or have a person delete some (the app, or DELETE /v1/projects/${project}/checks/{id}) or raise NEATROOTS_MAX_AGENT_CHECKS on the server`,
    );
  const inEffect = (project: string) => deps.checks.loaded().checks.filter((c) => appliesInProject(c, project));

  const list = async (project: string): Promise<ListedCheck[]> => {
    const records = await deps.data.checkRecords(project);
    const recs = new Map(records.map((r) => [r.id, r]));
    const effective = inEffect(project);
    // What each check replaced, as the loader resolved it (`neatroots checks list` prints the same entries).
    const overrides = overridesOf(deps.checks.loaded());
    const out = effective.map((c) => listed(c, overrides.get(c) ?? [], c.source === 'database' ? recs.get(c.id) : undefined));
    const shown = new Set(effective.filter((c) => c.source === 'database').map((c) => c.id));
    for (const r of records) if (!shown.has(r.id)) out.push(notInEffect(r));
    return out;
  };

  const get = async (project: string, id: string) => (await list(project)).find((c) => c.id === id && (c.source === 'database' || c.in_effect)) ?? null;

  /** `stored` is the check as parsed from `rec.yaml`: whether it halts is read from it, not from the text. */
  const store = async (project: string, rec: DbCheckInput, stored: Check, by: Author, warnings: string[], created: boolean): Promise<SavedCheck> => {
    // A new check of an agent's: the bound is checked again where it is saved, under a lock, so
    // agents saving at once cannot pass it (the count in savable is read before the save).
    const bounded = by === 'agent' && created && maxAgentChecks > 0 ? { ...rec, agent_checks_max: maxAgentChecks } : rec;
    try {
      await deps.data.putCheck(bounded);
    } catch (err) {
      const full = err instanceof AgentChecksFullError ? err : agentChecksFull(String((err as { details?: unknown })?.details ?? ''));
      if (full) throw tooManyAgentChecks(project, full.agents);
      throw err;
    }
    // In effect in this process now (the rule engine of the embedded default shares it).
    await deps.checks.reload();
    const check = await get(project, rec.id);
    const halts = isRuleCheck(stored) && stored.action === 'halt';
    return {
      check: check ?? { id: rec.id, source: 'database', origin: by, in_effect: false },
      created,
      warnings,
      ...(halts && deps.steering ? { steering: await deps.steering(project) } : {}),
    };
  };

  /** A check with this id from a person's file (~/.neatroots/checks, the project's .neatroots/checks) that applies in the project. */
  const personsFileCheck = (project: string, id: string): Check | undefined =>
    deps.checks.loaded().loaded.find((c) => c.id === id && (c.source === 'user' || c.source === 'project') && appliesInProject(c, project));

  /** Everything save refuses, in one place: validate answers exactly what save would. */
  const savable = async (project: string, sub: CheckSubmission, opts: { by: Author; id?: string }): Promise<{ s: Submitted; existing?: DbCheckRecord }> => {
    const s = parseSubmission(project, sub, opts.by);
    if (opts.id !== undefined && s.check.id !== opts.id) {
      throw invalid(new CheckError('check', s.check.id, 'id', `is ${JSON.stringify(s.check.id)} but the address names ${JSON.stringify(opts.id)}`), sub.yaml);
    }
    const records = await deps.data.checkRecords(project);
    const existing = records.find((r) => r.id === s.check.id);
    if (opts.id !== undefined && !existing) throw new AuthoringError(404, 'not_found', `no database check ${opts.id} in project ${project} (POST .../checks creates one)`);
    if (opts.by === 'agent' && existing && existing.origin !== 'agent') {
      throw new AuthoringError(403, 'forbidden', `check ${s.check.id} was written by ${WHO[existing.origin] ?? existing.origin}; a coding agent cannot change it`);
    }
    // A new check of an agent's past the project's bound (replacing one it saved is not a new one).
    if (opts.by === 'agent' && !existing && maxAgentChecks > 0) {
      const agents = records.filter((r) => r.origin === 'agent').length;
      if (agents >= maxAgentChecks) throw tooManyAgentChecks(project, agents);
    }
    // A person's check in a file (theirs or the project's) that applies here is not the agent's
    // to replace, whether it is in effect now or a check the agent saved earlier replaces it.
    const persons = opts.by === 'agent' ? personsFileCheck(project, s.check.id) : undefined;
    if (persons) {
      throw new AuthoringError(403, 'forbidden', `check ${s.check.id} is a person's check in ${persons.file ?? persons.source}; a coding agent cannot replace it`);
    }
    // Seed: a database check never replaces one of your halt rules (the loader would ignore it).
    const halt = inEffect(project).find((c) => c.id === s.check.id && c.source !== 'database' && isRuleCheck(c) && c.action === 'halt');
    if (halt) throw new AuthoringError(409, 'conflict', `check ${s.check.id} is your halt rule in ${halt.file ?? halt.source}; change it there`);
    return { s, existing };
  };

  return {
    list,
    get,

    async draft(project, concern, opts = {}) {
      if (!deps.draft) throw new AuthoringError(503, 'not_served', 'drafting is not served by this process (no question service in its configuration)');
      let d: Draft;
      try {
        d = await deps.draft({ concern, project, workflow: opts.workflow, tools: await recentTools(deps.queries, project) });
      } catch (e) {
        if (e instanceof NoModelError) {
          throw new AuthoringError(503, 'no_model', 'drafting needs an LLM: configure the local LLM (NEATROOTS_LLM_URL, NEATROOTS_LLM_MODEL) or the decision model; or write the check yourself (docs/checks.md)');
        }
        if (e instanceof CheckError) throw new AuthoringError(502, 'unusable_draft', `the model's draft is unusable: ${e.message}; try again or phrase the concern differently`);
        throw draftFailure(e) ?? e;
      }
      const { source: _source, file: _file, ...check } = d.check as Check & { file?: string };
      return { check, yaml: d.yaml, kind: d.check.kind === 'rule' ? 'rule' : 'question', warnings: d.warnings };
    },

    async preview(project, sub, opts) {
      const s = parseSubmission(project, sub, opts.by);
      const { signal } = opts;
      if (previewing >= previewsAtOnce) {
        throw new AuthoringError(429, 'too_many_previews', `${previewing} previews are running on this server, the most at once (each may make model calls); retry when one has finished`);
      }
      previewing++;
      // A preview its caller gave up on frees its place at once: from then on it makes no model
      // call, and it stops at its next item (previewCheck), so the caller's retry is not refused.
      let holding = true;
      const release = () => {
        if (holding) previewing--;
        holding = false;
      };
      signal?.addEventListener('abort', release, { once: true });
      try {
        return await previewCheck({
          project,
          check: s.check,
          warnings: s.warnings,
          runs: opts.runs ?? DEFAULT_PREVIEW_RUNS,
          modelCalls: opts.model_calls ?? DEFAULT_PREVIEW_MODEL_CALLS,
          queries: deps.queries,
          models: deps.models,
          signal,
          // Always bounded: the REST endpoint's callers (the CLI waits 5 minutes) get an answer
          // that says what it covered, not a preview that runs on after they gave up.
          timeMs: opts.time_ms ?? DEFAULT_PREVIEW_MS,
        });
      } finally {
        signal?.removeEventListener('abort', release);
        release();
      }
    },

    async validate(project, sub, opts) {
      const { s, existing } = await savable(project, sub, opts);
      const dropped = dropsHalt(existing, s.check);
      return { check_id: s.check.id, warnings: dropped ? [...s.warnings, haltDropped(s.check.id, false)] : s.warnings };
    },

    async save(project, sub: CheckSubmission, opts) {
      const { s, existing } = await savable(project, sub, opts);
      // The YAML is stored as written; a halt it drops is said, not kept (often a stale local copy).
      const warnings = dropsHalt(existing, s.check) ? [...s.warnings, haltDropped(s.check.id, true)] : s.warnings;
      return store(project, { id: s.check.id, yaml: s.yaml, origin: opts.by, project, saved: true }, s.check, opts.by, warnings, !existing);
    },

    async remove(project, id, by) {
      const existing = (await deps.data.checkRecords(project)).find((r) => r.id === id);
      if (!existing) {
        const file = inEffect(project).find((c) => c.id === id);
        if (file) throw new AuthoringError(409, 'conflict', `check ${id} is a ${file.source} check${file.file ? ` in ${file.file}` : ''}, not a database check: remove it there`);
        // A planner question still asked from its plan with no check left (deleted by a version
        // before plans kept deleted ones): a person's delete takes it out of the plan.
        if (by !== 'agent' && (await deps.data.deleteCheck(project, id))) return void (await deps.checks.reload());
        throw new AuthoringError(404, 'not_found', `no database check ${id} in project ${project}`);
      }
      if (by === 'agent' && existing.origin !== 'agent') throw new AuthoringError(403, 'forbidden', `check ${id} was written by ${WHO[existing.origin] ?? existing.origin}; a coding agent cannot delete it`);
      await deps.data.deleteCheck(project, id);
      await deps.checks.reload();
    },

    async halt(project, id, by) {
      if (by === 'agent') throw new AuthoringError(403, 'forbidden', 'a coding agent cannot switch a rule to halt; a person does that (neatroots checks halt ID, or the app)');
      const existing = (await deps.data.checkRecords(project)).find((r) => r.id === id);
      if (!existing) {
        const c = inEffect(project).find((x) => x.id === id);
        if (!c) throw new AuthoringError(404, 'not_found', `no check ${id} in project ${project}`);
        if (c.source === 'library') {
          throw new AuthoringError(409, 'refused', `check ${id} is a library check: it cannot halt. Save your own version of it (neatroots checks save FILE) and switch that to halt`);
        }
        throw new AuthoringError(409, 'refused', `check ${id} is in ${c.file ?? c.source}: set action: halt in that file`);
      }
      // A rule a coding agent saved is switched by the person (the seed: "switch a rule to action:
      // halt yourself"); stored as theirs, so no agent can change it afterwards.
      if (existing.origin !== 'app' && existing.origin !== 'cli' && existing.origin !== 'agent') {
        throw new AuthoringError(409, 'refused', `check ${id} was written by ${WHO[existing.origin] ?? existing.origin}: it cannot be switched to halt. Save it as your own first (neatroots checks save FILE), then halt it`);
      }
      let check: Check;
      try {
        check = parseDatabaseCheck({ id, yaml: existing.yaml, origin: existing.origin });
      } catch (e) {
        if (e instanceof CheckError) throw invalid(e, existing.yaml);
        throw e;
      }
      if (!isRuleCheck(check)) throw new AuthoringError(409, 'refused', `check ${id} is a ${check.kind} question: only rules can halt`);
      const yaml = withAction(existing.yaml, 'halt');
      // The check as it will be stored and loaded (its action line may keep a comment: `action: halt # ...`).
      let halted: Check;
      try {
        halted = parseDatabaseCheck({ id, yaml, origin: by });
      } catch (e) {
        if (e instanceof CheckError) throw invalid(e, yaml);
        throw e;
      }
      return store(project, { id, yaml, origin: by, project, saved: true }, halted, by, [], false);
    },
  };
}

/** Whether a stored check halts (a record that no longer parses does not). */
function recordHalts(rec: DbCheckRecord): boolean {
  try {
    const c = parseDatabaseCheck({ id: rec.id, yaml: rec.yaml, origin: rec.origin });
    return isRuleCheck(c) && c.action === 'halt';
  } catch {
    return false;
  }
}

/**
 * Replacing a database check that halts with one that does not: most often an edit made from
 * a local file that never had `action: halt` (the rule was switched with `checks halt`), so the
 * halt would go unnoticed. The save keeps the YAML as written and says so.
 */
function dropsHalt(existing: DbCheckRecord | undefined, next: Check): boolean {
  return existing !== undefined && recordHalts(existing) && !(isRuleCheck(next) && next.action === 'halt');
}

function haltDropped(id: string, saved: boolean): string {
  return saved
    ? `check ${id} halted; the YAML saved has no action: halt, so it now only flags: add action: halt to keep it halting, or run neatroots checks halt ${id}`
    : `check ${id} halts; this YAML has no action: halt, so saving it makes it only flag: add action: halt to keep it halting`;
}

const FAILED: Record<ModelErrorKind, string> = {
  timeout: 'timed out',
  rate_limited: 'is rate limited',
  server: 'failed',
  connection: 'cannot be reached',
  rejected: 'refused the request',
  aborted: 'call was aborted',
};

const AFTER_FAILURE = 'try again later, or write the check yourself (docs/checks.md)';

/**
 * What to do after a draft's model call failed with this HTTP status: waiting cures a timeout,
 * a rate limit or a 5xx, never a refused key (401, 403), a wrong URL or model name (404), nor a
 * request the server refuses as sent (another 4xx).
 */
function afterFailure(status: number | undefined): string {
  const yourself = 'or write the check yourself (docs/checks.md)';
  if (status === 401 || status === 403) {
    return `check the key of the model that drafts (NEATROOTS_DECISION_MODEL_KEY, or NEATROOTS_LLM_KEY for the local LLM) and that it may use that model, then restart neatroots; ${yourself}`;
  }
  if (status === 404) return `check the model's URL and name (NEATROOTS_DECISION_MODEL_URL and _NAME, or NEATROOTS_LLM_URL and NEATROOTS_LLM_MODEL); ${yourself}`;
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return `the model server refused the request as sent: its message says what; check the model's name and how requests are written for it (NEATROOTS_DECISION_MODEL_PARAMS, the _JSON_MODE settings: docs/questions.md); ${yourself}`;
  }
  return AFTER_FAILURE;
}

/**
 * Why a draft's model call failed, as the api answers it: the model's failure (a timeout, a
 * refused key, rate limits or 5xx still failing after the retries) is 502 model_error with its
 * reason; a full model queue is 429 model_busy (the api adds Retry-After); the question service
 * out of reach is 503 unavailable. In-process the error is the model's own (ModelError,
 * QueueFullError); distributed it is the question service's gRPC answer (compose.ts
 * questionRemote), whose status is the error's cause. Anything else is not the model's.
 */
export function draftFailure(e: unknown): AuthoringError | undefined {
  if (e instanceof QueueFullError) return new AuthoringError(429, 'model_busy', `drafting failed: ${e.message}`);
  if (e instanceof ModelError) return new AuthoringError(502, 'model_error', `drafting failed: the model ${FAILED[e.kind]} (${e.message}); ${afterFailure(e.status)}`);
  const cause = e instanceof Error ? (e.cause as { code?: unknown; details?: unknown } | undefined) : undefined;
  if (!cause || typeof cause.code !== 'number') return undefined;
  const details = typeof cause.details === 'string' && cause.details ? cause.details : (e as Error).message;
  switch (cause.code) {
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return new AuthoringError(429, 'model_busy', `drafting failed: the question service is busy (${details})`);
    case GrpcStatus.INTERNAL:
      // The question service's Complete answers a model's failure so, with the model's reason
      // (an HTTP failure's begins "HTTP 401: ").
      return new AuthoringError(502, 'model_error', `drafting failed: the model failed (${details}); ${afterFailure(httpStatus(details))}`);
    case GrpcStatus.DEADLINE_EXCEEDED:
      return new AuthoringError(502, 'model_error', `drafting failed: the question service gave no answer in time (${details}); ${AFTER_FAILURE}`);
    case GrpcStatus.UNAVAILABLE:
      return new AuthoringError(503, 'unavailable', `drafting failed: the question service cannot be reached (${details})`);
    case GrpcStatus.CANCELLED:
      // The question service stopped (a rollout, a scale-down) before the model answered: its
      // stop cuts calls still in flight after its grace. Another replica, or a retry, can draft.
      return new AuthoringError(503, 'unavailable', `drafting failed: the question service stopped before the model answered (${details}); retry`);
    default:
      return undefined;
  }
}

/** The HTTP status a model failure's message begins with ("HTTP 401: ..."), if any. */
function httpStatus(message: string): number | undefined {
  const m = /^HTTP (\d{3})\b/.exec(message);
  return m ? Number(m[1]) : undefined;
}

/**
 * The tools the project's agents called lately, so a drafted rule names real ones: those of the
 * 5 most recent runs whose spans are kept. A run whose spans retention deleted has only its
 * run_start's tools left (read, but not counted among the 5): a project that went quiet is
 * read back 20 runs at most.
 */
export async function recentTools(queries: ReviewQueries, project: string): Promise<string[]> {
  const tools = new Set<string>();
  const runs = await queries.listRuns(project, { limit: 20 });
  let withSpans = 0;
  for (const r of runs.items) {
    if (withSpans >= 5) break;
    const d = await queries.getRun(project, r.run_id);
    for (const t of d?.run.run_start?.tools ?? []) tools.add(t.name);
    if (r.spans_expired_at !== null) continue;
    withSpans++;
    for (const s of d?.spans ?? []) if (s.tool) tools.add(s.tool);
  }
  return [...tools].slice(0, 50);
}
