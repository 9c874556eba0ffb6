import { asksAboutAnswer, type Check, type QuestionCheck } from '@neatroots/checks';
import type { ToolInfo } from '@neatroots/spans';
import { cut } from './evidence';
import { ALWAYS_ON_QUESTIONS } from './classifier/heuristics';
import type { Plan } from './types';

/**
 * The question library's rules of use: which library questions run on a run (the four the
 * seed names on every agent that uses tools, the rest only when the planner picks them for
 * the workflow), and their parameters. A library question's `ask` may hold `{rules}`,
 * `{tools}` or `{task}`: the planner fills them per workflow, and without a plan they are
 * filled from the run's run_start.
 */
export const QUESTION_PARAMS = ['rules', 'tools', 'task'] as const;
export type QuestionParam = (typeof QUESTION_PARAMS)[number];

export interface RunStartInfo {
  system_prompt?: string;
  user_message?: string;
  tools?: ToolInfo[];
}

const PARAM_RE = /\{(rules|tools|task)\}/g;

export function askParams(ask: string): QuestionParam[] {
  return [...new Set([...ask.matchAll(PARAM_RE)].map((m) => m[1] as QuestionParam))];
}

export function defaultParam(name: QuestionParam, start: RunStartInfo | undefined): string {
  switch (name) {
    case 'rules':
      return start?.system_prompt ? 'every rule in its system prompt' : 'the rules it was given';
    case 'tools':
      return start?.tools?.length ? start.tools.map((t) => t.name).join(', ') : 'the tools it called';
    case 'task':
      return start?.user_message ? cut(start.user_message.replace(/\s+/g, ' ').trim(), 300) : 'what the user asked';
  }
}

/**
 * A question whose parameters were filled: `ask_as_written` is its `ask` as written, with
 * `{rules}`, `{tools}` and `{task}` in it. It travels with the question task (in its check's
 * JSON), so the question service keys the fast classifier and agreement by the question as
 * written (questionKey): every run of the question teaches one model, whatever its run's task.
 */
export type FilledQuestion = QuestionCheck & { ask_as_written?: string };

/** The question with its parameters filled: the plan's values first, then the run's. */
export function fillParams(q: QuestionCheck, params: Record<string, string> | undefined, start: RunStartInfo | undefined): FilledQuestion {
  if (!q.ask.includes('{')) return q;
  const ask = q.ask.replace(PARAM_RE, (_, name: QuestionParam) => params?.[name]?.trim() || defaultParam(name, start));
  if (ask === q.ask) return q;
  const filled: FilledQuestion = { ...q, ask, ask_as_written: (q as FilledQuestion).ask_as_written ?? q.ask };
  return filled;
}

export function isAlwaysOn(q: QuestionCheck): boolean {
  return q.source === 'library' && ALWAYS_ON_QUESTIONS.includes(q.id);
}

/**
 * Whether a library question is in effect for a run: the four always-on ones on an agent that
 * uses tools, the others when the workflow's plan picked them. Questions from the other
 * sources follow their own applies_to.
 */
export function libraryGate(q: QuestionCheck, usesTools: boolean, plan: Plan | undefined): boolean {
  if (q.source !== 'library') return true;
  if (ALWAYS_ON_QUESTIONS.includes(q.id)) return usesTools;
  return plan?.picks.some((p) => p.id === q.id) ?? false;
}

export function appliesTo(q: QuestionCheck, project: string, workflow: string | undefined): boolean {
  const a = q.applies_to;
  if (!a) return true;
  if (a.project?.length && !a.project.includes(project)) return false;
  if (a.not_project?.includes(project)) return false;
  if (a.workflow?.length && (workflow === undefined || !a.workflow.includes(workflow))) return false;
  return true;
}

/**
 * A question about the agent's answer needs to see it (the seed): a drafted or planned
 * question that asks about it is given scope trace and evidence.final_output automatically.
 */
export function ensureAnswerEvidence<T extends { ask: string; scope?: string; evidence?: Record<string, unknown> }>(q: T): T {
  if (!asksAboutAnswer(q.ask)) return q;
  return { ...q, scope: 'trace', evidence: { ...(q.evidence ?? {}), final_output: true } };
}

export interface QuestionSet {
  /** Changes whenever the checks change. */
  version: number;
  questions: QuestionCheck[];
}

let versions = 0;

/** The question checks of a loaded check set (the rule checks go to the rule engine). */
export function questionSet(checks: readonly Check[]): QuestionSet {
  return { version: ++versions, questions: checks.filter((c): c is QuestionCheck => c.kind !== 'rule') };
}
