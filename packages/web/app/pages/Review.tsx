import type { KeyboardEvent } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { count, when } from '../format';
import { useLoad } from '../load';
import { REVIEW_STATES, words, type ExampleFinding, type QueueItem, type ReviewState } from '../review-types';
import { href, Link, navigate, type Where } from '../router';
import type { Session } from '../session';
import type { Evidence } from '../sop-types';
import { ReviewStateLine, StateBadge, VerdictLine } from '../components/ReviewBadges';
import { SuggestionsSummary } from '../components/Suggestions';
import { VirtualList } from '../components/VirtualList';

const DEFAULT_STATES: readonly ReviewState[] = ['needs_review', 'regressed'];
/** Patterns asked for unless the link says `?limit=`: the API's most (it answers 50 when none is asked). */
const QUEUE_LIMIT = 500;
const ROW = 58;

/**
 * The review queue: what still needs a reviewer (by default needs_review and regressed), most
 * sessions first, with the count in every state. The states asked for and the selected item are
 * in the URL (?state=open&state=closed&item=...), so a link opens the same view. The list draws
 * only the rows in view (up to 500 items); the selected item's rule, verdict and examples are
 * beside it, and Enter (or its name) opens the pattern.
 */
export function Review({ session, base, where }: { session: Session; base: string; where: Where }) {
  const asked = where.query.getAll('state').filter((s): s is ReviewState => (REVIEW_STATES as readonly string[]).includes(s));
  const states = asked.length ? asked : DEFAULT_STATES;
  const limit = where.query.get('limit') ?? undefined;
  const queue = useLoad(() => api.reviewQueue(session, states, limit ? Number(limit) : QUEUE_LIMIT), [session, states.join(','), limit]);
  const items = queue.data?.items ?? [];
  const selectedId = where.query.get('item');
  const found = items.findIndex((i) => i.pattern_id === selectedId);
  // A link's item that is not in the list is said, not swapped for another (the first).
  const selected = found >= 0 ? found : !selectedId && items.length ? 0 : -1;
  const gone =
    queue.data && selectedId && found < 0 ? (
      <p role="alert">
        Pattern <code><Ext>{selectedId}</Ext></code> is not here (it may have been merged or removed).
      </p>
    ) : null;
  const item = selected >= 0 ? items[selected] : undefined;
  const path = `${base}/review`;
  const link = (next: readonly ReviewState[], itemId?: string) => {
    const q = new URLSearchParams();
    for (const s of next) q.append('state', s);
    if (limit) q.set('limit', limit);
    if (itemId) q.set('item', itemId);
    return q.size ? `${path}?${q}` : path;
  };
  const toggle = (s: ReviewState) => {
    const next = states.includes(s) ? states.filter((x) => x !== s) : REVIEW_STATES.filter((x) => x === s || states.includes(x));
    navigate(link(next.length ? next : DEFAULT_STATES));
  };
  const patternLink = (i: QueueItem) => `${base}/patterns/${encodeURIComponent(i.pattern_id)}`;
  const open = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && item) navigate(patternLink(item));
  };

  return (
    <main id="main" className="review-page">
      <h1>Review queue</h1>
      <p className="meta">
        Patterns of findings waiting for a reviewer, most sessions first.{' '}
        {queue.data && <>Last clustered: {queue.data.clustered_at ? when(queue.data.clustered_at) : 'never'}.</>}
      </p>
      <fieldset className="state-filter">
        <legend>Review states shown</legend>
        {REVIEW_STATES.map((s) => (
          <label key={s} className="check">
            <input type="checkbox" checked={states.includes(s)} onChange={() => toggle(s)} /> <StateBadge state={s} />{' '}
            <span className="count" aria-label={`${queue.data?.counts[s] ?? 0} patterns`}>
              {queue.data ? queue.data.counts[s] : '…'}
            </span>
          </label>
        ))}
      </fieldset>
      {queue.error && <p role="alert" className="error">{queue.error}</p>}
      {queue.data && items.length === 0 && (
        <>
          {gone}
          <p className="empty">Nothing {states.map(words).join(' or ')}: the queue is empty.</p>
        </>
      )}
      {queue.data && items.length > 0 && (
        <div className="review-grid">
          <section aria-labelledby="queue-h" onKeyDown={open}>
            <h2 id="queue-h">
              {queue.data.total} pattern{queue.data.total === 1 ? '' : 's'}
              {queue.data.total > items.length ? ` (the first ${items.length})` : ''}; ↑ ↓ to move, Enter to open
            </h2>
            <VirtualList
              id="queue"
              label="Review queue"
              count={items.length}
              rowHeight={ROW}
              selected={selected}
              onSelect={(i) => navigate(link(states, items[i].pattern_id), { replace: true })}
              rowLabel={(i) => `${items[i].name}, ${items[i].label}, ${items[i].procedure_name}, ${words(items[i].review_state)}, ${items[i].sessions} sessions`}
              renderRow={(i) => <QueueRow item={items[i]} />}
            />
          </section>
          {item ? <ItemDetail item={item} base={base} to={patternLink(item)} /> : gone && <section className="item-detail" aria-label="Selected pattern">{gone}</section>}
        </div>
      )}
    </main>
  );
}

function QueueRow({ item: i }: { item: QueueItem }) {
  return (
    <div className="queue-row">
      <div className="queue-name">
        <strong>
          <Ext>{i.name}</Ext>
        </strong>{' '}
        <span className="meta">
          <Ext>{i.label}</Ext>
        </span>
        <div className="meta ellipsis">
          <Ext>{i.procedure_name}</Ext>
          {i.theme && (
            <>
              {' '}
              · <Ext>{i.theme.name}</Ext>
            </>
          )}
        </div>
      </div>
      <StateBadge state={i.review_state} />
      <span className="num" title="sessions with a finding in the pattern">
        {i.sessions} sess.
      </span>
      <span className="num" title="findings since the latest verdict">
        {i.new_findings} new
      </span>
    </div>
  );
}

/** The selected item: its rule, review state, verdict, counts and example findings. */
function ItemDetail({ item: i, base, to }: { item: QueueItem; base: string; to: string }) {
  return (
    <section className="item-detail" aria-label="Selected pattern">
      <h2>
        <Link to={to}>
          <Ext>{i.name}</Ext>
        </Link>{' '}
        <span className="meta">
          <Ext>{i.label}</Ext>
        </span>
      </h2>
      <p className="meta">
        <Ext>{i.procedure_name}</Ext>
        {i.theme && <> · theme <Ext>{i.theme.name}</Ext></>} · {i.kind === 'rule' ? 'rule pattern' : i.kind === 'sub' ? 'failure mode' : 'other findings'}
      </p>
      <blockquote className="rule-text">
        <Ext text>{i.rule_text}</Ext>
      </blockquote>
      <ReviewStateLine r={i} />
      <p>Verdict: {i.verdict ? <VerdictLine v={i.verdict} /> : <span className="meta">none yet</span>}</p>
      <p className="meta">
        {count(i.sessions, 'session')} · {count(i.new_findings, 'new finding')} · {i.suppressed_count} suppressed
      </p>
      {i.suggestion && <SuggestionsSummary items={[i.suggestion]} />}
      <h3>Example findings</h3>
      <ul className="plain examples">
        {i.examples.map((e) => (
          <Example key={e.finding_id} e={e} base={base} />
        ))}
      </ul>
      <p>
        <Link to={to}>Open the pattern to give a verdict</Link>
      </p>
    </section>
  );
}

export function Example({ e, base }: { e: ExampleFinding; base: string }) {
  // The finding's evidence as the checker stored it: turn quotes (docs/procedures.md).
  const evidence = e.evidence as Evidence[];
  return (
    <li className="example">
      <div>
        <Link to={href(`${base}/sessions/${encodeURIComponent(e.session_id)}`)}>
          <Ext>{e.external_id}</Ext>
        </Link>{' '}
        <span className="meta">{when(e.started_at)}</span>{' '}
        <span className={`badge rule-${e.status}`}>{words(e.status)}</span>
        {e.suppressed && <span className="badge quiet">suppressed</span>}
      </div>
      <p className="excerpt">
        <Ext text>{e.excerpt}</Ext>
      </p>
      {evidence.length > 0 && (
        <ul className="evidence">
          {evidence.map((ev, k) => (
            <li key={k}>
              <span className="meta">turn {ev.turn} · {ev.source === 'tool_calls' ? 'tool call' : 'transcript'}</span>{' '}
              {ev.quote ? (
                <mark className="quote">
                  <Ext text>{ev.quote}</Ext>
                </mark>
              ) : (
                <span className="meta">(no words quoted)</span>
              )}
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}
