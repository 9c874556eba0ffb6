import { memo, useState } from 'react';
import { api } from '../api';
import { failure } from '../load';
import { shown, when } from '../format';
import { Ext } from './Ext';
import type { Session } from '../session';
import type { Finding } from '../types';

const STATE_WORDS: Record<Finding['state'], string> = {
  open: 'Open',
  active: 'Active (note sent)',
  resolved: 'Resolved',
  dismissed: 'Dismissed',
};

export function StateBadge({ state }: { state: Finding['state'] }) {
  return <span className={`badge state-${state}`}>{STATE_WORDS[state]}</span>;
}

/**
 * One finding on the run page: what the check says, the quote and how sure (a question's
 * label), what reached the agent (a note, a halt), the spans it cites, and dismiss or reopen
 * through the API.
 */
export const FindingCard = memo(FindingCardBody);

/**
 * A run has thousands of findings: memoised (FindingCard), a card renders again only when its
 * finding or a callback changes, not each time another span is selected (the callbacks must be
 * stable: useCallback).
 */
function FindingCardBody(props: {
  session: Session;
  finding: Finding;
  spanName(spanId: string): string | null;
  onShowSpan(spanId: string): void;
  onChange(f: Finding): void;
}) {
  const { finding: f } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const act = async (what: 'dismiss' | 'reopen') => {
    setBusy(true);
    setError(null);
    try {
      const r = await (what === 'dismiss' ? api.dismiss(props.session, f.id) : api.reopen(props.session, f.id));
      props.onChange(r.finding);
    } catch (err) {
      setError(failure(err));
    } finally {
      setBusy(false);
    }
  };
  const halted = f.action === 'halt' && !f.halt_suppressed;
  return (
    <article className={`finding state-${f.state}`} aria-label={`Finding: ${shown(f.title)}`} data-finding-id={f.id}>
      <header>
        <h3>
          <Ext>{f.title}</Ext>
        </h3>
        <StateBadge state={f.state} />
        {f.quiet && <span className="badge quiet" title="Raised while its check was quiet in this project: recorded, not counted">Quiet</span>}
      </header>
      <p className="meta">
        <code><Ext>{f.check_id}</Ext></code> · {f.kind} · {f.check_source} · raised {when(f.raised_at)}
        {f.count > 1 && <> · {f.count} times</>}
      </p>
      {f.confidence && (
        <p className="confidence">
          <strong>
            <Ext>{f.confidence}</Ext>
          </strong>
          {f.answered_by && <span className="meta"> · answered by <Ext>{f.answered_by}</Ext></span>}
        </p>
      )}
      {f.quote && <blockquote className="quote-block">“<Ext text>{f.quote}</Ext>”</blockquote>}
      {f.guidance && <p className="guidance"><Ext text>{f.guidance}</Ext></p>}
      <ul className="sent">
        {f.active_at && <li>Note sent to the agent {when(f.active_at)}</li>}
        {halted && <li className="halt">Halt sent: the run was stopped</li>}
        {f.action === 'halt' && f.halt_suppressed && <li>Halt not sent (steering is off for the project)</li>}
        {f.resolved_at && <li>Resolved {when(f.resolved_at)}</li>}
        {f.dismissed_at && (
          <li>
            Dismissed {when(f.dismissed_at)}
            {f.dismissed_by && <> by <Ext>{f.dismissed_by}</Ext></>}
            {f.dismiss_note && <>: <Ext text>{f.dismiss_note}</Ext></>}
          </li>
        )}
      </ul>
      {f.span_ids.length > 0 && (
        <p className="cites">
          Cites:{' '}
          {f.span_ids.map((id) => (
            <button key={id} type="button" className="link" onClick={() => props.onShowSpan(id)}>
              <Ext>{props.spanName(id) ?? id}</Ext>
            </button>
          ))}
        </p>
      )}
      <div className="actions">
        {f.state === 'dismissed' ? (
          <button type="button" disabled={busy} onClick={() => act('reopen')}>
            Reopen
          </button>
        ) : (
          <button type="button" disabled={busy} onClick={() => act('dismiss')}>
            Dismiss
          </button>
        )}
        {error && <span role="alert" className="error">{error}</span>}
      </div>
    </article>
  );
}
