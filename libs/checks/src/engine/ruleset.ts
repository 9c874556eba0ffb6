import type { Check, RuleCheck } from '../types';
import { isRuleCheck } from '../types';
import { compileRule, type CompiledRule, type TextMatcher } from './compile';
import type { RuleSet } from './engine';

let versions = 0;

/**
 * Compiles the rule checks of a loaded check set for the engine; questions are left to the
 * question service. `compiled`, when given, makes each rule (calling `compile` for the ones it
 * does not keep: SafeMatching keeps those of unchanged checks from one reload to the next).
 */
export function compileRuleSet(
  checks: readonly Check[],
  compileMatcher: (check: RuleCheck, pattern: string) => TextMatcher,
  compiled: (check: RuleCheck, compile: () => CompiledRule) => CompiledRule = (_c, compile) => compile(),
): RuleSet {
  const rules: CompiledRule[] = [];
  for (const c of checks) if (isRuleCheck(c)) rules.push(compiled(c, () => compileRule(c, compileMatcher)));
  return { version: ++versions, rules };
}
