import { useState } from 'react';
import { api } from '../api';
import { when } from '../format';
import { failure } from '../load';
import { words, type Suggestion } from '../review-types';
import type { Session } from '../session';

/**
 * Suggested edits for a pattern, shown only when the API returns some: their status and
 * freshness, the verdict they answer, the model's rationale, a pull request's link and the
 * release the edit went out in. On the pattern page each can show its edit (GET
 * suggestions/{id}): the procedure's text now and as suggested, side by side. Nothing here
 * acts on a suggestion.
 */
export function SuggestionsSummary({ items, session }: { items: Suggestion[]; session?: Session }) {
  if (items.length === 0) return null;
  return (
    <section className="suggestions" aria-labelledby="suggestions-h">
      <h3 id="suggestions-h">{items.length === 1 ? 'Suggestion' : `Suggestions (${items.length})`}</h3>
      <ul className="plain">
        {items.map((s) => (
          <li key={s.id} className="suggestion">
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
            {s.rationale && <p>{s.rationale}</p>}
            {s.error && <p className="error">{s.error}</p>}
            {s.note && <p className="meta">{s.note}</p>}
            {session && <Edit session={session} id={s.id} />}
          </li>
        ))}
      </ul>
    </section>
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
  return (
    <div className="side-by-side" aria-label="The procedure before and after the suggested edit">
      <div>
        <h4>Written against</h4>
        <pre className="text">{edit.old_text}</pre>
      </div>
      <div>
        <h4>Suggested</h4>
        <pre className="text">{edit.new_text ?? '(not generated)'}</pre>
      </div>
    </div>
  );
}
