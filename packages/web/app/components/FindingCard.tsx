import { useState } from 'react';
import { api } from '../api';
import { failure } from '../load';
import { when } from '../format';
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
export function FindingCard(props: {
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
    <article className={`finding state-${f.state}`} aria-label={`Finding: ${f.title}`} data-finding-id={f.id}>
      <header>
        <h3>{f.title}</h3>
        <StateBadge state={f.state} />
        {f.quiet && <span className="badge quiet" title="Raised while its check was quiet in this project: recorded, not counted">Quiet</span>}
      </header>
      <p className="meta">
        <code>{f.check_id}</code> · {f.kind} · {f.check_source} · raised {when(f.raised_at)}
        {f.count > 1 && <> · {f.count} times</>}
      </p>
      {f.confidence && (
        <p className="confidence">
          <strong>{f.confidence}</strong>
          {f.answered_by && <span className="meta"> · answered by {f.answered_by}</span>}
        </p>
      )}
      {f.quote && <blockquote className="quote-block">“{f.quote}”</blockquote>}
      {f.guidance && <p className="guidance">{f.guidance}</p>}
      <ul className="sent">
        {f.active_at && <li>Note sent to the agent {when(f.active_at)}</li>}
        {halted && <li className="halt">Halt sent: the run was stopped</li>}
        {f.action === 'halt' && f.halt_suppressed && <li>Halt not sent (steering is off for the project)</li>}
        {f.resolved_at && <li>Resolved {when(f.resolved_at)}</li>}
        {f.dismissed_at && (
          <li>
            Dismissed {when(f.dismissed_at)}
            {f.dismissed_by && <> by {f.dismissed_by}</>}
            {f.dismiss_note && <>: {f.dismiss_note}</>}
          </li>
        )}
      </ul>
      {f.span_ids.length > 0 && (
        <p className="cites">
          Cites:{' '}
          {f.span_ids.map((id) => (
            <button key={id} type="button" className="link" onClick={() => props.onShowSpan(id)}>
              {props.spanName(id) ?? id}
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
