import { CheckError, parseDatabaseCheck, sha1Hex, type QuestionCheck } from '@neatroots/checks';
import { ModelError, type ChatMessage } from '@neatroots/ports';
import type { ToolInfo } from '@neatroots/spans';
import { stringify } from 'yaml';
import { ALWAYS_ON_QUESTIONS, LIBRARY_QUESTIONS } from './classifier/heuristics';
import { cut } from './evidence';
import { askParams, ensureAnswerEvidence } from './library';
import { describeError } from './answerer';
import { ModelQueueClosedError } from './batcher';
import { readJsonReply, UnusableReply, type ReplyAccount } from './prompt';
import type { AnsweredBy, Plan, PlanPick, PlanRequest } from './types';

/**
 * The planner (the seed's "Where questions come from"): on a workflow's first run the LLM
 * reads the system prompt, the first user message and the tools, picks 3 to 8 library
 * questions, fills in their parameters, and writes new questions only for gaps. Plans are
 * cached per workflow and redone when new tools appear. Questions it writes are database
 * checks (the fourth check source) until a person saves them; a person's edit stays theirs, and
 * deleting one's check drops it from the plan for good. With no LLM, or when the LLM's
 * plan is unusable, a plan is made from the same inputs by rules.
 */
export interface PlanStore {
  get(project: string, workflow: string): Promise<Plan | undefined>;
  put(plan: Plan): Promise<void>;
}

export class MemoryPlanStore implements PlanStore {
  private readonly plans = new Map<string, Plan>();
  async get(project: string, workflow: string): Promise<Plan | undefined> {
    return this.plans.get(`${project}\u0000${workflow}`);
  }
  async put(plan: Plan): Promise<void> {
    this.plans.set(`${plan.project}\u0000${plan.workflow}`, plan);
  }
}

/** A workflow needs a plan when it has none, or when a tool it has not planned for appears. */
export function needsPlan(plan: Plan | undefined, tools: readonly ToolInfo[]): boolean {
  if (!plan) return true;
  return tools.some((t) => !plan.tools.includes(t.name));
}

export function toolsHash(tools: readonly ToolInfo[]): string {
  return sha1Hex([...new Set(tools.map((t) => t.name))].sort().join('\u0000')).slice(0, 16);
}

export const MIN_PICKS = 3;
export const MAX_PICKS = 8;
export const MAX_WRITTEN = 3;

/** The LLM's reply, with what its server said of it when the gateway passes that on (a refusal, a cut). */
export type PlannerChat = (messages: ChatMessage[]) => Promise<ReplyAccount & { answered_by: AnsweredBy }>;

export interface PlannerOptions {
  /** The library's questions (source library), the planner's menu. */
  library: readonly QuestionCheck[];
  /** The LLM, through the question service's queue; absent: plans are made by rules. */
  chat?: PlannerChat;
  now?: () => number;
  /** A bug (logged at error level, with its stack). */
  onError?: (msg: string, err: unknown) => void;
  /** The LLM failed to plan (it timed out, could not be reached, answered an HTTP error or an unusable reply): planned by rules. */
  onWarn?: (msg: string) => void;
}

const RULE_SENTENCE = /[^.!?\n]*\b(must|never|always|do not|don't|only|should not|shouldn't|may not|is not allowed|are not allowed)\b[^.!?\n]*[.!?]?/gi;

/** The system prompt's rules, as the planner fills `{rules}` without an LLM. */
export function extractRules(systemPrompt: string | undefined, max = 8): string | undefined {
  if (!systemPrompt) return undefined;
  const rules = [...systemPrompt.matchAll(RULE_SENTENCE)].map((m) => m[0].trim()).filter((r) => r.length > 8);
  if (!rules.length) return undefined;
  return cut(rules.slice(0, max).join(' '), 1_200);
}

function slug(s: string, max = 40): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, max).replace(/-+$/, '') || 'x';
}

/** The id a planner-written question gets: prefixed by its workflow, so workflows never collide. */
export function plannedId(workflow: string, id: string): string {
  return `plan-${slug(workflow, 30)}-${slug(id, 50)}`.slice(0, 100);
}

/**
 * The plan without the written questions whose database check was deleted (`deleted`, which
 * ChecksRepo.delete fills), those ids kept in its own `deleted`: a question a person deleted is
 * neither asked again nor saved again, even when the LLM writes it again on a re-plan.
 */
export function forgetDeleted(plan: Plan, deleted: readonly string[] | undefined): Plan {
  if (!deleted?.length) return plan;
  const ids = [...new Set([...(plan.deleted ?? []), ...deleted])];
  return { ...plan, written: plan.written.filter((w) => !ids.includes(w.id)), deleted: ids };
}

export class Planner {
  private readonly now: () => number;
  private readonly onError: (msg: string, err: unknown) => void;
  private readonly onWarn: (msg: string) => void;

  constructor(private readonly opts: PlannerOptions) {
    this.now = opts.now ?? Date.now;
    this.onError = opts.onError ?? ((msg, err) => console.error(`planner: ${msg}`, err));
    this.onWarn = opts.onWarn ?? ((msg) => console.warn(`planner: ${msg}`));
  }

  private libraryIds(): string[] {
    return this.opts.library.map((q) => q.id);
  }

  async plan(asked: PlanRequest, previous?: Plan): Promise<Plan> {
    // Tools planned for before stay planned for: a new tool adds to the workflow's set, and the
    // plan is made for them all (a tool span asks with the one tool it showed).
    const tools = [...new Set([...(previous?.tools ?? []), ...asked.tools.map((t) => t.name)])];
    const req: PlanRequest = { ...asked, tools: [...asked.tools, ...tools.filter((n) => !asked.tools.some((t) => t.name === n)).map((name) => ({ name }))] };
    let plan: Plan | undefined;
    if (this.opts.chat) {
      try {
        plan = await this.llmPlan(req);
      } catch (e) {
        // A stop closed the model's queue: no plan now, not the rules' (saved, it would stand for
        // good: a workflow planned is not planned again). The next run asks again.
        if (e instanceof ModelQueueClosedError) throw e;
        // The model's failure is not a bug: said in a line, without a stack.
        if (e instanceof ModelError) this.onWarn(`the LLM could not plan ${req.workflow}: ${describeError(e)}; planning by rules`);
        else if (e instanceof UnusableReply) this.onWarn(`the LLM could not plan ${req.workflow}: ${e.message}; planning by rules`);
        else this.onError(`the LLM's plan for ${req.workflow} is unusable; planning by rules`, e);
      }
    }
    plan ??= this.rulePlan(req);
    plan.tools = tools;
    // Questions written for an earlier version of the workflow stay until a person deletes
    // their database check; a deleted one is never written again (forgetDeleted).
    for (const w of previous?.written ?? []) if (!plan.written.some((x) => x.id === w.id)) plan.written.push(w);
    return forgetDeleted(plan, previous?.deleted);
  }

  /** Rules: the four always-on questions for an agent with tools, and what the inputs point to. */
  rulePlan(req: PlanRequest): Plan {
    const ids = this.libraryIds();
    const has = (id: string) => ids.includes(id);
    const picks: PlanPick[] = [];
    const add = (id: string, params?: Record<string, string>) => {
      if (has(id) && !picks.some((p) => p.id === id)) picks.push(params ? { id, params } : { id });
    };
    const tools = req.tools.length > 0;
    if (tools) for (const id of ALWAYS_ON_QUESTIONS) add(id);
    const rules = extractRules(req.system_prompt);
    if (rules) add(LIBRARY_QUESTIONS.systemPrompt, { rules });
    if (req.user_message) add(LIBRARY_QUESTIONS.unfinished, { task: cut(req.user_message.replace(/\s+/g, ' ').trim(), 300) });
    if (tools) {
      add(LIBRARY_QUESTIONS.wrongTool, { tools: req.tools.map((t) => t.name).join(', ') });
      add(LIBRARY_QUESTIONS.repeating);
    }
    for (const id of ids) if (picks.length < MIN_PICKS) add(id);
    return { project: req.project, workflow: req.workflow, tools: [], picks: picks.slice(0, MAX_PICKS), written: [], planned_by: 'heuristic', at_ms: this.now() };
  }

  private async llmPlan(req: PlanRequest): Promise<Plan> {
    const res = await this.opts.chat!(planMessages(req, this.opts.library));
    const json = readJsonReply(res);
    if (!json || typeof json !== 'object' || Array.isArray(json)) throw new UnusableReply('the plan is not a JSON object');
    const o = json as Record<string, unknown>;
    const ids = this.libraryIds();
    const picks: PlanPick[] = [];
    for (const p of Array.isArray(o.pick) ? o.pick : []) {
      const id = typeof p === 'string' ? p : p && typeof p === 'object' ? (p as Record<string, unknown>).id : undefined;
      if (typeof id !== 'string' || !ids.includes(id) || picks.some((x) => x.id === id)) continue;
      const params: Record<string, string> = {};
      const raw = p && typeof p === 'object' ? (p as Record<string, unknown>).params : undefined;
      const wanted = askParams(this.opts.library.find((q) => q.id === id)!.ask);
      if (raw && typeof raw === 'object') {
        for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
          if ((wanted as string[]).includes(k) && typeof v === 'string' && v.trim()) params[k] = cut(v.trim(), 1_200);
        }
      }
      picks.push(Object.keys(params).length ? { id, params } : { id });
    }
    // Seed: 3 to 8 library questions. Too few: topped up by the rules' choice; too many: cut.
    if (picks.length < MIN_PICKS) {
      for (const p of this.rulePlan(req).picks) if (picks.length < MIN_PICKS && !picks.some((x) => x.id === p.id)) picks.push(p);
    }
    const written: { id: string; yaml: string }[] = [];
    for (const n of (Array.isArray(o.new) ? o.new : []).slice(0, MAX_WRITTEN)) {
      const w = this.written(n, req);
      if (w && !written.some((x) => x.id === w.id)) written.push(w);
    }
    return { project: req.project, workflow: req.workflow, tools: [], picks: picks.slice(0, MAX_PICKS), written, planned_by: res.answered_by, at_ms: this.now() };
  }

  /** A planner-written question as a database check, validated like any other; undefined if invalid. */
  private written(raw: unknown, req: PlanRequest): { id: string; yaml: string } | undefined {
    if (!raw || typeof raw !== 'object') return undefined;
    const n = raw as Record<string, unknown>;
    if (typeof n.ask !== 'string' || !n.ask.trim()) return undefined;
    const id = plannedId(req.workflow, typeof n.id === 'string' ? n.id : n.ask);
    if (this.libraryIds().includes(id)) return undefined;
    const check = draftToCheck(n, id, { workflow: req.workflow, project: req.project, description: `Written by the planner for workflow ${req.workflow}.` });
    try {
      const yaml = stringify(check);
      parseDatabaseCheck({ id, yaml });
      return { id, yaml };
    } catch (e) {
      if (!(e instanceof CheckError)) throw e;
      this.onError(`dropped a planned question that does not validate: ${e.message}`, undefined);
      return undefined;
    }
  }
}

/** A question as drafted by an LLM, made into a check object (not yet validated). */
export function draftToCheck(
  n: Record<string, unknown>,
  id: string,
  where: { workflow?: string; project?: string; description?: string },
): Record<string, unknown> {
  const kind = n.kind === 'choice' || n.kind === 'score' ? n.kind : 'yes_no';
  const scope = n.scope === 'span' || n.scope === 'session' ? n.scope : 'trace';
  const evidence: Record<string, unknown> = {};
  if (n.final_output === true) evidence.final_output = true;
  let check: Record<string, unknown> = {
    id,
    kind,
    title: typeof n.title === 'string' && n.title.trim() ? n.title.trim() : (n.ask as string).trim(),
    scope,
    ask: (n.ask as string).trim(),
    when: n.when === 'live' ? 'live' : 'end',
  };
  if (where.description) check.description = where.description;
  if (Object.keys(evidence).length) check.evidence = evidence;
  if (kind === 'choice') {
    check.options = n.options;
    check.flag_on = n.flag_on;
  }
  if (kind === 'score') {
    check.levels = n.levels;
    check.flag_at_level = n.flag_at_level;
  }
  if (kind === 'yes_no' && typeof n.flag_at === 'number') check.flag_at = n.flag_at;
  if (typeof n.guidance === 'string' && n.guidance.trim()) check.guidance = n.guidance.trim();
  const applies: Record<string, string[]> = {};
  if (where.workflow) applies.workflow = [where.workflow];
  if (where.project) applies.project = [where.project];
  if (Object.keys(applies).length) check.applies_to = applies;
  check = ensureAnswerEvidence(check as { ask: string; scope?: string; evidence?: Record<string, unknown> });
  return check;
}

export const PLANNER_SYSTEM = `You plan the checks for an AI agent. You are given its system prompt, the first user message of a run, its tools, and a library of questions. Pick the 3 to 8 library questions that fit this agent best and fill in their parameters. Write new questions only for risks the library does not cover (at most 3), each phrased so that "yes" means a problem.
Reply with one JSON object and nothing else:
{"pick": [{"id": "<library id>", "params": {"<param>": "<value>"}}], "new": [{"id": "<short-slug>", "title": "...", "ask": "...", "scope": "trace" or "span", "final_output": true if it asks about the agent's answer, "guidance": "what the agent should do instead, in the second person"}]}`;

export function planMessages(req: PlanRequest, library: readonly QuestionCheck[]): ChatMessage[] {
  const lib = library
    .map((q) => {
      const params = askParams(q.ask);
      return `- ${q.id}${params.length ? ` (params: ${params.join(', ')})` : ''}: ${q.title}. Asks: ${q.ask}`;
    })
    .join('\n');
  const tools = req.tools.length ? req.tools.map((t) => `- ${t.name}${t.description ? `: ${t.description}` : ''}`).join('\n') : '(none)';
  return [
    { role: 'system', content: PLANNER_SYSTEM },
    {
      role: 'user',
      content:
        `### System prompt\n${req.system_prompt ?? '(none)'}\n\n### First user message\n${req.user_message ?? '(none)'}\n\n### Tools\n${tools}\n\n` +
        `### Library\n${lib}\n\nParameters: rules = the system prompt's rules to check, one sentence each; tools = the tools and what each is for; task = what the user asked for.`,
    },
  ];
}
