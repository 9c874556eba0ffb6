import { when } from '../format';
import { words, type Suggestion } from '../review-types';

/**
 * Suggested edits for a pattern, shown only when the API returns some: their status and
 * freshness, the model's rationale, a pull request's link, and (on the pattern page) the rule's
 * text before and after, side by side. Nothing here acts on a suggestion: the page offers only
 * what the API serves.
 */
export function SuggestionsSummary({ items, detail = false }: { items: Suggestion[]; detail?: boolean }) {
  if (items.length === 0) return null;
  return (
    <section className="suggestions" aria-labelledby="suggestions-h">
      <h3 id="suggestions-h">{items.length === 1 ? 'Suggestion' : `Suggestions (${items.length})`}</h3>
      <ul className="plain">
        {items.map((s) => (
          <li key={s.id} className="suggestion">
            <span className={`badge suggestion-${s.status}`}>{words(s.status)}</span>
            {s.freshness && <span className={`badge freshness-${s.freshness}`}>{words(s.freshness)}</span>}
            {s.created_at && <span className="meta"> {when(s.created_at)}</span>}
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
            {detail && (s.old_text || s.new_text) && (
              <div className="side-by-side" aria-label="The procedure before and after the suggested edit">
                <div>
                  <h4>Now</h4>
                  <pre className="text">{s.old_text ?? ''}</pre>
                </div>
                <div>
                  <h4>Suggested</h4>
                  <pre className="text">{s.new_text ?? ''}</pre>
                </div>
              </div>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
