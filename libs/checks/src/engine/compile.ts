import type { RuleCheck, RuleType } from '../types';
import { compileFilter, type SpanPredicate } from './filter';
import { RULE_KINDS, type RuleKind, type RuleOf } from './rules';

/**
 * What `match` needs of a regex. The answer may come later (a promise): in production the
 * patterns people write run long texts off the event loop under a time limit (../match/).
 */
export interface TextMatcher {
  test(text: string | Buffer): boolean | Promise<boolean>;
  /**
   * Present when the pattern may be tested in one pass with the span's other `match` patterns
   * over the same text (an RE2.Set, see joint.ts); absent: it is always tested alone.
   */
  readonly joint?: JointPattern;
}

/** What testing a pattern together with others needs to know of it. */
export interface JointPattern {
  /** The pattern as compiled (RE2 syntax). */
  readonly source: string;
  /** Its estimated program size (instructions). */
  readonly size: number;
  /**
   * The most a pass over a text may cost inline, in text bytes times the program size of every
   * pattern in the pass (Infinity: any text, the library's reviewed patterns). Past it, each
   * pattern is tested alone, as its matcher decides (off the event loop for the user's).
   */
  readonly budget: number;
  /** False while the pattern is switched off (disabled for being slow): it is then left out. */
  live(): boolean;
}

/** The most specific check heads its group; by default a narrower rule type is more specific. */
export function defaultPriority(type: RuleType): number {
  return RULE_KINDS[type].priority;
}

/** A rule check ready for the engine: its type's module and what that module compiled once. */
export interface CompiledRule<T extends RuleType = RuleType, D = unknown> {
  check: RuleCheck;
  rule: RuleOf<T>;
  kind: RuleKind<T, D>;
  /** What the type's module compiled for this check (a matcher, predicates), see rules/kind.ts. */
  data: D;
  priority: number;
  /** Only the user's own rules may halt (seed: "your own rules only"). */
  canHalt: boolean;
  /** The rule's `span` filter (every span when it has none). */
  span: SpanPredicate;
  appliesTo(project: string, workflow: string | undefined): boolean;
  /** Span types the rule can act on (undefined: any): lets the engine skip it for the others. */
  spanTypes?: ReadonlySet<string>;
  /** Tools the rule can act on (undefined: any). */
  spanTools?: ReadonlySet<string>;
}

export function compileRule(check: RuleCheck, compileMatcher: (check: RuleCheck, pattern: string) => TextMatcher): CompiledRule {
  const r = check.rule;
  const kind = RULE_KINDS[r.type] as RuleKind;
  const wf = check.applies_to?.workflow?.length ? new Set(check.applies_to.workflow) : undefined;
  const pj = check.applies_to?.project?.length ? new Set(check.applies_to.project) : undefined;
  // Where a project's own version of this id replaced it (see sources.ts).
  const notPj = check.applies_to?.not_project?.length ? new Set(check.applies_to.not_project) : undefined;
  const reach = kind.reach ? kind.reach(r) : 'span' in r ? { types: r.span.type, tools: r.span.tool } : {};
  const compiled: CompiledRule = {
    check,
    rule: r,
    kind,
    data: kind.compile?.(r, check, { matcher: compileMatcher }),
    priority: check.priority ?? kind.priority,
    // The user's and a project's files, and a check kept in the database: one whose YAML says
    // halt was saved or switched to halt by a person (the app, the CLI), since the loader refuses
    // a halt from anyone else (sources.ts, ORIGINS_THAT_MAY_HALT). Never the shipped library.
    canHalt: check.source === 'user' || check.source === 'project' || check.source === 'database',
    span: compileFilter('span' in r ? r.span : undefined),
    appliesTo: (project, workflow) => (!pj || pj.has(project)) && (!notPj || !notPj.has(project)) && (!wf || (workflow !== undefined && wf.has(workflow))),
  };
  if (!kind.everySpan && reach.types?.length) compiled.spanTypes = new Set(reach.types);
  if (!kind.everySpan && reach.tools?.length) compiled.spanTools = new Set(reach.tools);
  return compiled;
}
