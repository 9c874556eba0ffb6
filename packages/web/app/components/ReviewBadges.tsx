import { when } from '../format';
import { Ext } from './Ext';
import { words, type ReviewFields, type Verdict } from '../review-types';

/** A pattern's review state, in words (never by colour alone). */
export function StateBadge({ state }: { state: string }) {
  return <span className={`badge review-${state}`}>{words(state)}</span>;
}

export function VerdictBadge({ verdict }: { verdict: Verdict | null }) {
  if (!verdict) return <span className="meta">no verdict</span>;
  return (
    <span className="states inline">
      <span className={`badge verdict-${verdict.verdict}`}>{words(verdict.verdict)}</span>
      {verdict.inherited && <span className="badge quiet" title="A failure mode without a verdict of its own has its rule pattern's">inherited</span>}
      {verdict.carried_over && <span className="badge warn" title="Carried over by a recluster, not confirmed since">carried over</span>}
    </span>
  );
}

/** The review state, why, and the fix's progress when a fix was applied. */
export function ReviewStateLine({ r }: { r: ReviewFields }) {
  return (
    <p className="review-state">
      <StateBadge state={r.review_state} />
      {r.review_reason && <span className="meta"> ({words(r.review_reason)})</span>} <Ext text>{r.review_note}</Ext>
      {/* The note already counts the fix's sessions (fix_sessions of fix_sessions_needed). */}
      {r.fix_release && <span className="meta"> · the fix is in release {r.fix_release.number}</span>}
    </p>
  );
}

export function VerdictLine({ v }: { v: Verdict }) {
  return (
    <>
      <VerdictBadge verdict={v} />{' '}
      <span className="meta">
        {when(v.created_at)}
        {v.reviewer && (
          <>
            {' '}
            · <Ext>{v.reviewer}</Ext>
          </>
        )}
      </span>
      {v.note && (
        <q className="note">
          <Ext text>{v.note}</Ext>
        </q>
      )}
    </>
  );
}
