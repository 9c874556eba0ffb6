import type { RuleResult, SopResult } from '../sop-types';

/** A session's or procedure's result; none yet reads as a dash. */
export function ResultBadge({ result }: { result: SopResult | null }) {
  if (!result) return <span className="meta">—</span>;
  return <span className={`badge result-${result}`}>{result.replace('_', ' ')}</span>;
}

/** A rule's status; a finding is marked in words, not by colour alone. */
export function RuleStatusBadge({ rule }: { rule: RuleResult }) {
  return (
    <span className="states">
      <span className={`badge rule-${rule.status}`}>{rule.status.replace(/_/g, ' ')}</span>
      {rule.finding && <span className={rule.suppressed ? 'badge quiet' : 'badge halt'}>{rule.suppressed ? 'finding (suppressed)' : 'finding'}</span>}
    </span>
  );
}
