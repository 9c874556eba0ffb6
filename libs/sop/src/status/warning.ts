import type { WarningObservation } from './observation';
import type { Derived } from './steps';

/**
 * A warning sign is a condition, never a pass or fail: present (it came up and was handled as
 * the sign says, or the sign says nothing to do), unheeded (it came up, the sign says what to
 * do, and the agent did not), absent, or not_checked (nobody could tell whether it came up, or
 * whether it was handled).
 */
export function warningStatus(o: WarningObservation): Derived {
  const base = { evidence: o.evidence, reason: o.reason };
  if (o.present === null) return { ...base, status: 'not_checked' };
  if (!o.present) return { ...base, evidence: [], status: 'absent' };
  if (!o.rule.action || o.heeded === true) return { ...base, status: 'present' };
  if (o.heeded === false) return { ...base, status: 'unheeded' };
  return { ...base, status: 'not_checked' };
}
