import { asksAboutAnswer, CheckError, parseCheck, type Check } from '@neatroots/checks';
import { stringify } from 'yaml';
import { readJsonReply } from './prompt';
import { draftToCheck, type PlannerChat } from './planner';

/**
 * A check drafted from a concern written in plain words (the seed: "describe a concern ...
 * and the LLM drafts the question"; issue 14: a rule when the concern is a sequence or a
 * threshold, since code answers those exactly and at no model cost, else a question). The
 * LLM is asked through the question service's gateway; what it writes is validated like any
 * check, so an unusable draft is an error naming the field, never a check that cannot run.
 */

/** The rule types a draft may be: an order of calls, or a number reaching a limit. */
export const DRAFT_RULE_TYPES = ['requires_before', 'count', 'threshold', 'repeat', 'slow', 'errors'] as const;

export const DRAFT_CHECK_SYSTEM = `You turn a concern about an AI agent, written in plain language, into one neatroots check. Reply with one JSON object and nothing else.
If the concern is about the order of tool calls (a tool called without an earlier call of another, such as a refund without an order lookup), write a rule:
{"check": "rule", "id": "<short-slug>", "title": "...", "rule": {"type": "requires_before", "call": {"tool": ["<tool>"]}, "requires": {"tool": ["<tool>"]}}, "guidance": "what the agent should do instead, in the second person"}
If it is about a number reaching a limit, write a rule with one of these:
{"type": "count", "span": {"tool": ["<tool>"]}, "at_least": <n>} (a tool called n times in a run)
{"type": "threshold", "metric": "total_tokens" | "llm_calls" | "tool_calls" | "errors" | "duration_ms" | "cost", "at_least": <n>}
{"type": "slow", "span": {"tool": ["<tool>"]}, "at_least_ms": <ms>}
{"type": "errors", "span": {"tool": ["<tool>"]}, "at_least": <n>} (failures in a row)
Otherwise write a question, phrased so that "yes" means a problem:
{"check": "question", "id": "<short-slug>", "title": "...", "kind": "yes_no", "scope": "trace" or "span", "ask": "...", "final_output": true if it is about what the agent told the user, "guidance": "..."}`;

export interface DraftRequest {
  concern: string;
  /** The check applies here only. */
  project?: string;
  workflow?: string;
  /** Tools the project's agents call, so a rule names real ones. */
  tools?: readonly string[];
}

export interface Draft {
  check: Check;
  /** The check as YAML, ready to preview and save. */
  yaml: string;
  /** Things that work but are probably not what was meant, and what the draft did about the seed's advice. */
  warnings: string[];
}

export function draftMessages(req: DraftRequest): { role: 'system' | 'user'; content: string }[] {
  const tools = req.tools?.length ? `\n\nThe agent's tools: ${req.tools.join(', ')}` : '';
  return [
    { role: 'system', content: DRAFT_CHECK_SYSTEM },
    { role: 'user', content: `Concern: ${req.concern.trim()}${tools}` },
  ];
}

function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60).replace(/-+$/, '') || 'drafted-check';
}

/** Drafts one check from a concern. Throws CheckError (file "draft") when the model's draft is unusable. */
export async function draftCheck(req: DraftRequest, chat: PlannerChat): Promise<Draft> {
  if (!req.concern.trim()) throw new CheckError('draft', undefined, 'concern', 'is empty: say in a sentence what should not happen');
  const res = await chat(draftMessages(req));
  let json: unknown;
  try {
    // Refused, cut at max_tokens or no text at all is said as such, not only as "not JSON".
    json = readJsonReply(res);
  } catch (e) {
    throw new CheckError('draft', undefined, undefined, (e as Error).message);
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new CheckError('draft', undefined, undefined, 'the model did not answer with a JSON object');
  const n = json as Record<string, unknown>;
  const id = slug(typeof n.id === 'string' ? n.id : typeof n.title === 'string' ? n.title : req.concern);
  const warnings: string[] = [];
  let raw: Record<string, unknown>;
  if (n.check === 'rule' || (n.rule !== undefined && n.ask === undefined)) {
    const rule = n.rule as Record<string, unknown> | undefined;
    const type = rule && typeof rule === 'object' ? rule.type : undefined;
    if (!(DRAFT_RULE_TYPES as readonly unknown[]).includes(type)) {
      throw new CheckError('draft', id, 'rule.type', `the model drafted ${JSON.stringify(type)}; a drafted rule is one of ${DRAFT_RULE_TYPES.join(', ')}`);
    }
    raw = { id, kind: 'rule', title: str(n.title) ?? req.concern.trim().slice(0, 120), rule };
    if (str(n.guidance)) raw.guidance = str(n.guidance);
    // A draft only flags: switching a rule to halt is a person's decision (issue 14).
    raw.action = 'flag';
    const applies: Record<string, string[]> = {};
    if (req.workflow) applies.workflow = [req.workflow];
    if (req.project) applies.project = [req.project];
    if (Object.keys(applies).length) raw.applies_to = applies;
  } else {
    if (typeof n.ask !== 'string' || !n.ask.trim()) throw new CheckError('draft', id, 'ask', 'the model drafted a question with no question in it');
    raw = draftToCheck(n, id, { workflow: req.workflow, project: req.project });
    // The seed: a question about the answer needs scope trace and evidence.final_output; a
    // drafted one is given it (draftToCheck), and the draft says so.
    if (asksAboutAnswer(n.ask) && (n.scope === 'span' || n.final_output !== true)) {
      warnings.push(`ask: asks about the agent's answer, so the draft was given scope: trace and evidence: { final_output: true } to see it`);
    }
  }
  const check = parseCheck(raw, 'draft', 'database', warnings);
  return { check, yaml: stringify(raw), warnings };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v.trim() ? v.trim() : undefined;
}
