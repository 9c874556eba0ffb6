import { useState } from 'react';
import { api } from '../api';
import { when } from '../format';
import { failure } from '../load';
import { byReviewer } from '../reviewer';
import { words, type Suggestion } from '../review-types';
import type { Session } from '../session';

type Done = (ok: boolean, text: string) => void;

/**
 * Suggested edits for a pattern, shown only when the API returns some: their status and
 * freshness, the verdict they answer, the model's rationale, a pull request's link and the
 * release the edit went out in. On the pattern page (`act`) each can show its edit (GET
 * suggestions/{id}: the procedure's text it was written against and as suggested, side by
 * side), and a proposed one can be applied (a pull request with a GitHub connection, else a
 * draft at head), rewritten against the file as it is now, or dismissed.
 */
export function SuggestionsSummary({ items, act }: { items: Suggestion[]; act?: { session: Session; onDone: Done } }) {
  if (items.length === 0) return null;
  return (
    <section className="suggestions" aria-labelledby="suggestions-h">
      <h3 id="suggestions-h">{items.length === 1 ? 'Suggestion' : `Suggestions (${items.length})`}</h3>
      <ul className="plain">
        {items.map((s) => (
          <li key={s.id} className="suggestion" aria-label={`Suggestion ${s.id}`}>
            <span className="states inline">
              <span className={`badge suggestion-${s.status}`}>{words(s.status)}</span>
              {s.freshness && <span className={`badge freshness-${s.freshness}`}>{words(s.freshness)}</span>}
            </span>{' '}
            <span className="meta">
              for the verdict {words(s.verdict)} · {s.path} · {when(s.created_at)}
              {s.released_in && <> · in release {s.released_in.number}</>}
            </span>
            {s.pr_url && (
              <>
                {' '}
                <a href={s.pr_url} target="_blank" rel="noreferrer">
                  pull request
                </a>
              </>
            )}
            {s.status === 'generating' && <p className="meta">The reasoning model is writing it; this page reloads until it is done.</p>}
            {s.status === 'applied' && !s.released_in && <p className="meta">Saved as a draft at head: it goes out with the next publish (Procedures → unpublished changes).</p>}
            {s.rationale && <p>{s.rationale}</p>}
            {s.error && <p className="error">{s.error}</p>}
            {s.note && <p className="meta">{s.note}</p>}
            {act && s.status === 'proposed' && <Actions id={s.id} conflict={s.freshness === 'conflict'} {...act} />}
            {act && s.status !== 'generating' && s.status !== 'failed' && <Edit session={act.session} id={s.id} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Actions({ id, conflict, session, onDone }: { id: string; conflict: boolean; session: Session; onDone: Done }) {
  const [busy, setBusy] = useState(false);
  const run = async (action: 'apply' | 'rewrite' | 'dismiss') => {
    setBusy(true);
    try {
      const s = await api.actOnSuggestion(session, id, action, byReviewer());
      const said = {
        apply: s.pr_url ? `Suggestion applied: a pull request is open, ${s.pr_url}.` : 'Suggestion applied: saved as a draft at head, it goes out with the next publish.',
        rewrite: 'Suggestion rewritten: a new one is being written against the current text.',
        dismiss: 'Suggestion dismissed.',
      }[action];
      onDone(true, said);
    } catch (err) {
      onDone(false, `The suggestion was not ${action === 'apply' ? 'applied' : action === 'rewrite' ? 'rewritten' : 'dismissed'}: ${failure(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="actions">
      <button type="button" disabled={busy || conflict} onClick={() => run('apply')} title={conflict ? 'The file changed on the same lines: rewrite it instead' : undefined}>
        Apply
      </button>
      <button type="button" disabled={busy} onClick={() => run('rewrite')}>
        Rewrite against the current text
      </button>
      <button type="button" disabled={busy} onClick={() => run('dismiss')}>
        Dismiss
      </button>
    </div>
  );
}

/** The suggestion's edit, read when asked for: the file it was written against and the suggested one. */
function Edit({ session, id }: { session: Session; id: string }) {
  const [edit, setEdit] = useState<{ old_text: string; new_text: string | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (!edit) {
    return (
      <p>
        <button type="button" className="link" onClick={() => api.suggestion(session, id).then(setEdit, (e: unknown) => setError(failure(e)))}>
          Show the edit
        </button>
        {error && <span className="error"> {error}</span>}
      </p>
    );
  }
  const before = edit.old_text.split('\n');
  const after = edit.new_text === null ? null : edit.new_text.split('\n');
  return (
    <div className="side-by-side" aria-label="The procedure before and after the suggested edit">
      <div>
        <h4>Written against</h4>
        <Lines lines={before} others={after ?? before} mark="d-del" sign="-" />
      </div>
      <div>
        <h4>Suggested</h4>
        {after ? <Lines lines={after} others={before} mark="d-add" sign="+" /> : <p className="meta">(not generated)</p>}
      </div>
    </div>
  );
}

/** A file's lines, those the other side does not have marked (by colour and by their sign). */
function Lines({ lines, others, mark, sign }: { lines: string[]; others: string[]; mark: string; sign: string }) {
  const there = new Set(others);
  return (
    <pre className="diff">
      {lines.map((l, i) => (
        <span key={i} className={there.has(l) ? undefined : mark}>
          {there.has(l) ? ' ' : sign}
          {l}
        </span>
      ))}
    </pre>
  );
}
