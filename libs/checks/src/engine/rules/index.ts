import type { RuleType } from '../../types';
import { count } from './count';
import { errors } from './errors';
import type { RuleKind } from './kind';
import { match } from './match';
import { repeat } from './repeat';
import { requiresBefore } from './requires-before';
import { runEnd } from './run-end';
import { slow } from './slow';
import { threshold } from './threshold';
import { unrecoveredError } from './unrecovered-error';

/**
 * Every rule type's module. The mapped type makes the compiler ask for a module for each
 * type in RULE_TYPES, so a type the schema accepts always has an implementation.
 */
export const RULE_KINDS: { readonly [T in RuleType]: RuleKind<T> } = {
  repeat,
  errors,
  count,
  slow,
  threshold,
  match,
  requires_before: requiresBefore,
  unrecovered_error: unrecoveredError,
  run_end: runEnd,
};

export { DEFAULT_FAILURE_WORDS } from './unrecovered-error';
export type { CompileDeps, RuleKind, RuleOf, RuleRef, RuleStep } from './kind';
