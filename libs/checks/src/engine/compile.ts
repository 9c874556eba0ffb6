import type { RuleCheck, RuleType } from '../types';
import { compileFilter, type SpanPredicate } from './filter';

/** What `match` needs of a regex: RE2 with a time budget in production (see ../regex.ts). */
export interface TextMatcher {
  test(text: string | Buffer): boolean;
}

/** The most specific check heads its group; by default a narrower rule type is more specific. */
const DEFAULT_PRIORITY: Record<RuleType, number> = {
  match: 90,
  requires_before: 85,
  repeat: 80,
  errors: 70,
  unrecovered_error: 60,
  slow: 50,
  run_end: 40,
  count: 30,
  threshold: 20,
};

export function defaultPriority(type: RuleType): number {
  return DEFAULT_PRIORITY[type];
}

export interface CompiledRule {
  check: RuleCheck;
  priority: number;
  /** Only the user's own rules may halt (seed: "your own rules only"). */
  canHalt: boolean;
  span: SpanPredicate;
  call?: SpanPredicate;
  requires?: SpanPredicate;
  matcher?: TextMatcher;
  words?: string[];
  appliesTo(project: string, workflow: string | undefined): boolean;
  /** Span types the rule can act on (undefined: any): lets the engine skip it for the others. */
  spanTypes?: ReadonlySet<string>;
  /** Tools the rule can act on (undefined: any). */
  spanTools?: ReadonlySet<string>;
}

/** Words that mean the final answer admits something failed (unrecovered_error's hint). */
export const DEFAULT_FAILURE_WORDS = [
  'error', 'fail', 'unable', "couldn't", 'could not', "can't", 'cannot', 'sorry', 'problem', 'issue',
  'unfortunately', 'not able', "didn't work", 'went wrong', 'unavailable', 'not possible', 'timed out', 'timeout',
];

export function compileRule(check: RuleCheck, compileMatcher: (check: RuleCheck, pattern: string) => TextMatcher): CompiledRule {
  const r = check.rule;
  const wf = check.applies_to?.workflow?.length ? new Set(check.applies_to.workflow) : undefined;
  const pj = check.applies_to?.project?.length ? new Set(check.applies_to.project) : undefined;
  // Where a project's own version of this id replaced it (see sources.ts).
  const notPj = check.applies_to?.not_project?.length ? new Set(check.applies_to.not_project) : undefined;
  const compiled: CompiledRule = {
    check,
    priority: check.priority ?? DEFAULT_PRIORITY[r.type],
    canHalt: check.source === 'user' || check.source === 'project',
    span: compileFilter('span' in r ? r.span : undefined),
    appliesTo: (project, workflow) => (!pj || pj.has(project)) && (!notPj || !notPj.has(project)) && (!wf || (workflow !== undefined && wf.has(workflow))),
  };
  if ('span' in r && r.span.type?.length) compiled.spanTypes = new Set(r.span.type);
  if ('span' in r && r.span.tool?.length) compiled.spanTools = new Set(r.span.tool);
  if (r.type === 'requires_before') {
    if (r.call.type?.length && r.requires.type?.length) compiled.spanTypes = new Set([...r.call.type, ...r.requires.type]);
    if (r.call.tool?.length && r.requires.tool?.length) compiled.spanTools = new Set([...r.call.tool, ...r.requires.tool]);
    compiled.call = compileFilter(r.call);
    compiled.requires = compileFilter(r.requires);
  }
  if (r.type === 'match') compiled.matcher = compileMatcher(check, r.pattern);
  if (r.type === 'unrecovered_error') compiled.words = (r.words?.length ? r.words : DEFAULT_FAILURE_WORDS).map((w) => w.toLowerCase());
  return compiled;
}
