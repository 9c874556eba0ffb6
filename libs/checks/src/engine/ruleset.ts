import type { Check, RuleCheck } from '../types';
import { isRuleCheck } from '../types';
import { compileRule, type CompiledRule, type TextMatcher } from './compile';
import type { RuleSet } from './engine';

let versions = 0;

/** Compiles the rule checks of a loaded check set for the engine; questions are left to the question service. */
export function compileRuleSet(checks: readonly Check[], compileMatcher: (check: RuleCheck, pattern: string) => TextMatcher): RuleSet {
  const rules: CompiledRule[] = [];
  for (const c of checks) if (isRuleCheck(c)) rules.push(compileRule(c, compileMatcher));
  return { version: ++versions, rules };
}
