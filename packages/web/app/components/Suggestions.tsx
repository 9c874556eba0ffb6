import { useState } from 'react';
import { api } from '../api';
import { when } from '../format';
import { Ext } from './Ext';
import { failure } from '../load';
import { byReviewer } from '../reviewer';
import { UnifiedDiff } from './UnifiedDiff';
import { words, type Suggestion, type SuggestionView } from '../review-types';
import type { Session } from '../session';

/**
 * Says how an action went; `writing`: the text says a suggested edit is being written, which the
 * page replaces with how it went once the model is done (ready, or failed and why), after `keep`.
 */
type Done = (ok: boolean, text: string, writing?: { keep: string }) => void;

/**
 * The statuses the page offers actions for: those the API lets a suggestion be dismissed in
 * (generating, proposed, failed, pr_open; docs/suggestions.md). A pull request that cannot be
 * followed any more (the connection gone) is dismissed to stop following it.
 */
const ACTED_ON: readonly Suggestion['status'][] = ['generating', 'proposed', 'failed', 'pr_open'];

/** The pattern page's part: where a new suggestion is asked for, when its verdict allows one. */
export interface SuggestAct {
  session: Session;
  onDone: Done;
  /** The pattern, and whether its verdict asks for an edit (real, acceptable, sop_wrong). */
  patternId: string;
  verdictSuggests: boolean;
}

/**
 * Suggested edits for a pattern, shown when the API returns some: their status and freshness,
 * the verdict they answer, the model's rationale, a pull request's link and the release the
 * edit went out in. On the pattern page (`act`) each can show its edit (GET suggestions/{id}:
 * the procedure's text it was written against and as suggested, side by side, the agents whose
 * instructions change, and what changed in the file since), and a proposed one can be applied
 * (a pull request with a GitHub connection, else a draft at head), rewritten against the file
 * as it is now, or dismissed with a note; a failed one written again or dismissed; one being
 * written or with its pull request open dismissed (the pull request stays on GitHub; it is no
 * longer followed). When the verdict asks for an edit and none is being written or waiting,
 * one can be asked for.
 */
export function SuggestionsSummary({ items, act }: { items: Suggestion[]; act?: SuggestAct }) {
  const waiting = items.some((s) => s.status === 'generating' || s.status === 'proposed');
  const canAsk = !!act?.verdictSuggests && !waiting;
  if (items.length === 0 && !canAsk) return null;
  return (
    <section className="suggestions" aria-labelledby="suggestions-h">
      <h3 id="suggestions-h">{items.length === 1 ? 'Suggestion' : items.length ? `Suggestions (${items.length})` : 'Suggestions'}</h3>
      {act && canAsk && <AskForOne act={act} again={items.length > 0} />}
      <ul className="plain">
        {items.map((s) => (
          <li key={s.id} className="suggestion" aria-label={`Suggestion ${s.id}`}>
            <span className="states inline">
              <span className={`badge suggestion-${s.status}`}>{words(s.status)}</span>
              {s.freshness && <span className={`badge freshness-${s.freshness}`}>{words(s.freshness)}</span>}
            </span>{' '}
            <span className="meta">
              for the verdict {words(s.verdict)} · <Ext>{s.path}</Ext> · {when(s.created_at)}
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
            {s.rationale && (
              <p>
                <Ext text>{s.rationale}</Ext>
              </p>
            )}
            {s.error && (
              <p className="error">
                <Ext text>{s.error}</Ext>
              </p>
            )}
            {s.note && (
              <p className="meta">
                <Ext text>{s.note}</Ext>
              </p>
            )}
            {s.status === 'proposed' && s.freshness === 'conflict' && (
              <p className="error conflict-why">
                The procedure changed on the same lines since this was written, so it cannot be applied as it is: rewrite it against the current text (the
                edit shows the lines).
              </p>
            )}
            {act && ACTED_ON.includes(s.status) && <Actions suggestion={s} {...act} />}
            {act && s.status !== 'generating' && s.status !== 'failed' && <Edit session={act.session} id={s.id} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Asks the reasoning model for an edit answering the pattern's verdict (POST patterns/{id}/suggest), and says how it went. */
async function askForSuggestion(act: SuggestAct, said: string, refused: string): Promise<void> {
  try {
    await api.suggest(act.session, act.patternId, byReviewer());
    act.onDone(true, said, { keep: '' });
  } catch (err) {
    act.onDone(false, `${refused}: ${failure(err)}`);
  }
}

function Actions({ suggestion, ...act }: { suggestion: Suggestion } & SuggestAct) {
  const { session, onDone } = act;
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState('');
  const conflict = suggestion.freshness === 'conflict';
  const again = async () => {
    setBusy(true);
    await askForSuggestion(act, 'A new suggestion is being written.', 'The suggestion was not asked for again');
    setBusy(false);
  };
  const run = async (action: 'apply' | 'rewrite' | 'dismiss') => {
    setBusy(true);
    try {
      const s = await api.actOnSuggestion(session, suggestion.id, action, action === 'dismiss' && note.trim() ? { ...byReviewer(), note: note.trim() } : byReviewer());
      const said = {
        apply: s.pr_url ? `Suggestion applied: a pull request is open, ${s.pr_url}.` : 'Suggestion applied: saved as a draft at head, it goes out with the next publish.',
        rewrite: 'Suggestion rewritten: a new one is being written against the current text.',
        dismiss: suggestion.status === 'pr_open' ? 'Suggestion dismissed: its pull request is no longer followed (it stays on GitHub).' : 'Suggestion dismissed.',
      }[action];
      onDone(true, said, action === 'rewrite' ? { keep: '' } : undefined);
    } catch (err) {
      const what = { apply: 'applied', rewrite: 'rewritten', dismiss: 'dismissed' }[action];
      onDone(false, `The suggestion was not ${what}: ${failure(err)}`);
    } finally {
      setBusy(false);
    }
  };
  const proposed = suggestion.status === 'proposed';
  const failed = suggestion.status === 'failed';
  const prOpen = suggestion.status === 'pr_open';
  return (
    <div className="actions">
      {proposed && (
        <>
          <button type="button" disabled={busy || conflict} onClick={() => run('apply')} title={conflict ? 'The file changed on the same lines: rewrite it instead' : undefined}>
            Apply
          </button>
          <button type="button" disabled={busy} onClick={() => run('rewrite')}>
            Rewrite against the current text
          </button>
        </>
      )}
      {failed && (
        <button type="button" disabled={busy} onClick={() => void again()}>
          Write it again
        </button>
      )}
      <label className="inline-field">
        <span>Why dismiss (optional)</span>
        <input type="text" value={note} onChange={(e) => setNote(e.target.value)} placeholder="kept with the suggestion" />
      </label>
      <button
        type="button"
        disabled={busy}
        onClick={() => run('dismiss')}
        title={prOpen ? 'Stops following the pull request; it stays open on GitHub' : undefined}
      >
        Dismiss
      </button>
      {prOpen && <span className="meta">dismissing stops following the pull request; it stays open on GitHub until closed there</span>}
    </div>
  );
}

/** The button that asks for a suggestion when none is being written or waiting. */
function AskForOne({ act, again }: { act: SuggestAct; again: boolean }) {
  const [busy, setBusy] = useState(false);
  const ask = async () => {
    setBusy(true);
    await askForSuggestion(act, 'A suggested edit is being written.', 'No suggestion was asked for');
    setBusy(false);
  };
  return (
    <p>
      <button type="button" disabled={busy} onClick={() => void ask()}>
        {again ? 'Suggest another edit' : 'Suggest an edit'}
      </button>{' '}
      <span className="meta">the reasoning model rewrites the rule for the current verdict</span>
    </p>
  );
}

/** The suggestion's edit, read when asked for: the file it was written against and the suggested one. */
function Edit({ session, id }: { session: Session; id: string }) {
  const [edit, setEdit] = useState<Pick<SuggestionView, 'old_text' | 'new_text' | 'plan' | 'since_written'> | null>(null);
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
    <>
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
      {edit.since_written && <SinceWritten since={edit.since_written} />}
      {edit.plan && edit.plan.agents.length > 0 && (
        <div className="plan" aria-label="Agents whose instructions change">
          <h4>Agents whose instructions change</h4>
          {edit.plan.agents.map((a) => (
            <details key={a.agent}>
              <summary>
                <Ext>{a.agent}</Ext> <span className="meta">+{a.added} −{a.removed} lines</span>
              </summary>
              <UnifiedDiff text={a.diff} />
            </details>
          ))}
        </div>
      )}
    </>
  );
}

/** What happened to the file since the suggestion was written: nothing, edits it merges with, or a conflict and its lines. */
function SinceWritten({ since }: { since: NonNullable<SuggestionView['since_written']> }) {
  if (since.state === 'current') return null;
  if (since.state === 'merges') {
    return (
      <div className="since-written" aria-label="Changes since it was written">
        <p className="meta">The file changed since this was written, on other lines: Apply merges the edit into it.</p>
        <UnifiedDiff text={since.changes} />
      </div>
    );
  }
  return (
    <div className="since-written" aria-label="Changes since it was written">
      <p className="error">{since.reason ? <Ext text>{since.reason}</Ext> : 'The file changed on the same lines since this was written.'}</p>
      {since.conflicts.length > 0 && (
        <table className="conflicts">
          <thead>
            <tr>
              <th scope="col">line</th>
              <th scope="col">written against</th>
              <th scope="col">now</th>
              <th scope="col">suggested</th>
            </tr>
          </thead>
          <tbody>
            {since.conflicts.map((c) => (
              <tr key={c.line}>
                <td>{c.line}</td>
                <td><pre><Ext text>{c.base.join('\n')}</Ext></pre></td>
                <td><pre><Ext text>{c.current.join('\n')}</Ext></pre></td>
                <td><pre><Ext text>{c.suggested.join('\n')}</Ext></pre></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {since.issues.length > 0 && (
        <ul className="issues">
          {since.issues.map((i) => (
            <li key={`${i.file}:${i.line}:${i.message}`}>
              <Ext>{i.file}</Ext>:{i.line}: <Ext text>{i.message}</Ext>
            </li>
          ))}
        </ul>
      )}
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
          <Ext text>{l}</Ext>
        </span>
      ))}
    </pre>
  );
}
