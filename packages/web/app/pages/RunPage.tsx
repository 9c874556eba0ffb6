import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, ApiFailure } from '../api';
import { FindingCard, StateBadge } from '../components/FindingCard';
import { Highlight } from '../components/Highlight';
import { VirtualList } from '../components/VirtualList';
import { asText, count, duration, shown, when } from '../format';
import { Ext } from '../components/Ext';
import { failure, passing, retrying, useRetryAfter503 } from '../load';
import { href, Link, navigate, type Where } from '../router';
import type { Session } from '../session';
import { mergeSpans, timelineRows, timeRange } from '../spans';
import type { Finding, ListedSpan, RunDetail, Span } from '../types';

const ROW = 30;
/** Finding cards shown at first, and added by each "Show more": the page stays a bounded size. */
const FINDINGS_PAGE = 100;
/** A span's findings are marked ⚑ each up to this many; more read as one "⚑ 4". */
const MARKERS = 3;
/** The state a span's markers show when they are one: the most pressing of its findings'. */
const STATE_ORDER: Finding['state'][] = ['open', 'active', 'resolved', 'dismissed'];
/** A run not ended is looked at again this often while its tab is visible (GET runs/{id}?since=). */
const FOLLOW_MS = 3_000;
/** After failures, the wait doubles up to this. */
const FOLLOW_MAX_MS = 60_000;
/** Pages of new spans (500 each) one look reads at most before it shows them. */
const MAX_FOLLOW_PAGES = 20;
/** Problems a "Show older findings" reads a page (GET findings?run_id=, its most). */
const OLDER_PAGE = 500;

const byRaise = (a: Finding, b: Finding) => (a.raised_at < b.raised_at ? -1 : a.raised_at > b.raised_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The findings held with those read later (a run page's `since` answer, an older page): each
 * read again replaces its copy, a new one takes its place by time; what did not change stays
 * the same object. `prev` as it was when nothing is new or changed.
 */
function mergeFindings(prev: Finding[], later: Finding[]): Finding[] {
  if (!later.length) return prev;
  const at = new Map(prev.map((f, i) => [f.id, i]));
  const out = prev.slice();
  let changed = false;
  let added = false;
  for (const f of later) {
    const i = at.get(f.id);
    if (i === undefined) {
      at.set(f.id, out.length);
      out.push(f);
      added = changed = true;
    } else if (JSON.stringify(out[i]) !== JSON.stringify(f)) {
      out[i] = f;
      changed = true;
    }
  }
  if (added) out.sort(byRaise);
  return changed ? out : prev;
}

/** `next`, with each item equal to one of `prev` (by its JSON) being that one: what did not change does not render again. */
function keepSame<T extends { id: string }>(prev: T[], next: T[]): T[] {
  const old = new Map(prev.map((x) => [x.id, x]));
  let same = prev.length === next.length;
  const out = next.map((x, i) => {
    const o = old.get(x.id);
    const keep = o && JSON.stringify(o) === JSON.stringify(x) ? o : x;
    if (keep !== prev[i]) same = false;
    return keep;
  });
  return same ? prev : out;
}

/** Whether the page follows the run (it had not ended when opened), and how that stands. */
type Follow = { state: 'live'; at: number; error?: string } | { state: 'ended'; at: number };

const clock = (ms: number) => new Date(ms).toLocaleTimeString();

function mostPressing(findings: Finding[]): Finding['state'] {
  return STATE_ORDER.find((s) => findings.some((f) => f.state === s)) ?? findings[0].state;
}

/**
 * The run page: its spans as a timeline (nested by parent, duration bars, errors marked), the
 * selected span's inputs and outputs, and its findings beside the spans they cite. The span
 * (or finding) shown is in the URL.
 */
export function RunPage({ session, base, runId, where }: { session: Session; base: string; runId: string; where: Where }) {
  const [detail, setDetail] = useState<RunDetail | null>(null);
  /** The run's spans as listed: their input and output cut to a preview (`truncated`). */
  const [spans, setSpans] = useState<ListedSpan[]>([]);
  const [more, setMore] = useState(false);
  const [findings, setFindings] = useState<Finding[]>([]);
  /** How many findings the run has in all: the API gives the newest 500 (findings_total). */
  const [findingsTotal, setFindingsTotal] = useState(0);
  const findingsNow = useRef(findings);
  findingsNow.current = findings;
  /** Reading the older findings (GET findings?run_id=): where the next page starts (null: none left), and how that stands. */
  const olderCursor = useRef<string | null | undefined>(undefined);
  const [older, setOlder] = useState<{ busy: boolean; error?: string }>({ busy: false });
  const [error, setError] = useState<string | null>(null);
  /** A later page of spans that failed: said beside the spans already shown, which stay. */
  const [spansError, setSpansError] = useState<string | null>(null);
  /** Where the spans stored after those read start (the API's spans_since). */
  const since = useRef<string | null>(null);
  const [follow, setFollow] = useState<Follow | null>(null);
  /** The first read again after a failure that will pass (load.ts passing). */
  const retry = useRetryAfter503([session, runId]);

  useEffect(() => {
    let live = true;
    setDetail(null);
    setError(null);
    setSpansError(null);
    setFollow(null);
    setOlder({ busy: false });
    olderCursor.current = undefined;
    since.current = null;
    (async () => {
      const d = await api.run(session, runId);
      if (!live) return;
      since.current = d.spans_since;
      setDetail(d);
      setFindings(d.findings);
      setFindingsTotal(d.findings_total);
      setSpans(d.spans);
      // The rest of a long run, page by page: the first page shows while the others come.
      let cursor = d.spans_next_cursor;
      let all = d.spans;
      setMore(!!cursor);
      try {
        while (cursor && live) {
          const page = await api.spans(session, runId, cursor);
          all = all.concat(page.spans);
          if (live) setSpans(all);
          cursor = page.next_cursor;
        }
      } catch (err) {
        if (live) setSpansError(failure(err));
      }
      if (live) setMore(false);
    })().catch((err) => {
      if (!live) return;
      if (!passing(err)) return setError(failure(err));
      // The review service away a moment: the page reads the run again by itself.
      setError(retrying(err));
      retry.later();
    });
    return () => {
      live = false;
    };
  }, [session, runId, retry.tick]);

  // A run not ended, its spans read: what is new is read every few seconds while the tab is
  // visible (only the spans stored since, the run and its findings), until the run ends.
  // An ended run whose questions still wait for the model is followed too, until they are answered.
  const followable = !!detail && !more && (!detail.run.end_status || detail.questions_pending > 0);
  useEffect(() => {
    if (!followable) return;
    let stopped = false;
    let busy = false;
    let failures = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    setFollow((f) => f ?? { state: 'live', at: Date.now() });
    const later = (ms: number) => {
      clearTimeout(timer);
      if (!stopped && !document.hidden) timer = setTimeout(() => void tick(), ms);
    };
    const tick = async () => {
      if (stopped || busy || document.hidden || !since.current) return;
      busy = true;
      let wait = FOLLOW_MS;
      try {
        let d = await api.runSince(session, runId, since.current);
        const got = d.spans.slice();
        // The findings written since (findings_scope 'changed'), or the run's newest (more changed
        // than an answer carries, or an API of an earlier version): those of every answer of the look.
        let newest = d.findings_scope !== 'changed';
        let fresh = d.findings;
        // More stored than one answer holds (a tab hidden a while, a busy run): the rest now,
        // before the run's end is shown, which stops the following with spans still unread.
        for (let pages = 1; d.spans_next_cursor && pages < MAX_FOLLOW_PAGES && !stopped; pages++) {
          d = await api.runSince(session, runId, d.spans_since);
          for (const s of d.spans) got.push(s);
          if (d.findings_scope !== 'changed') newest = true;
          fresh = d.findings_scope === 'changed' ? mergeFindings(fresh, d.findings) : d.findings;
        }
        if (stopped) return;
        failures = 0;
        since.current = d.spans_since;
        // Not caught up yet (more than MAX_FOLLOW_PAGES pages): the end waits for the next look, at once.
        const run = d.spans_next_cursor ? { ...d.run, end_status: null, ended_at: null } : d.run;
        if (got.length) setSpans((prev) => mergeSpans(prev, got));
        setFindings((prev) => (newest ? keepSame(prev, fresh) : mergeFindings(prev, fresh)));
        // The newest again: older ones are read from the start again.
        if (newest) olderCursor.current = undefined;
        setFindingsTotal(d.findings_total);
        setDetail((prev) =>
          !prev ||
          (JSON.stringify(prev.run) === JSON.stringify(run) && JSON.stringify(prev.not_checked) === JSON.stringify(d.not_checked) && prev.questions_pending === d.questions_pending)
            ? prev
            : { ...prev, run, not_checked: d.not_checked, questions_pending: d.questions_pending },
        );
        // An ended run whose questions still wait is followed (live) until they are answered.
        setFollow(run.end_status && !(d.questions_pending > 0) ? { state: 'ended', at: Date.now() } : { state: 'live', at: Date.now() });
        if (d.spans_next_cursor) wait = 0;
      } catch (err) {
        if (stopped) return;
        failures++;
        wait = Math.min(FOLLOW_MAX_MS, FOLLOW_MS * 2 ** failures);
        setFollow((f) => ({ state: 'live', at: f?.at ?? Date.now(), error: failure(err) }));
      } finally {
        busy = false;
      }
      later(wait);
    };
    // A hidden tab asks nothing; shown again, it looks at once.
    const shown = () => {
      if (document.hidden) clearTimeout(timer);
      else if (!busy) void tick();
    };
    document.addEventListener('visibilitychange', shown);
    later(FOLLOW_MS);
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', shown);
    };
  }, [session, runId, followable]);

  const rows = useMemo(() => timelineRows(spans), [spans]);
  const rowKey = useCallback((i: number) => rows[i].span.span_id, [rows]);
  const range = useMemo(() => timeRange(spans), [spans]);
  const byId = useMemo(() => new Map(spans.map((s) => [s.span_id, s])), [spans]);
  const citing = useMemo(() => {
    const m = new Map<string, Finding[]>();
    for (const f of findings)
      for (const id of f.span_ids) {
        const list = m.get(id);
        if (list) list.push(f);
        else m.set(id, [f]);
      }
    return m;
  }, [findings]);

  // Which span is shown: ?span=, else the first span ?finding= cites.
  const wantedFinding = where.query.get('finding');
  const wantedSpan = where.query.get('span') ?? findings.find((f) => f.id === wantedFinding)?.span_ids[0] ?? null;
  const selected = wantedSpan ? rows.findIndex((r) => r.span.span_id === wantedSpan) : -1;
  // Stable across span selections, so the memoised finding cards do not render again.
  const show = useCallback((spanId: string) => navigate(href(where.path, { span: spanId, finding: wantedFinding }), { replace: true }), [where.path, wantedFinding]);
  const spanName = useCallback((id: string) => byId.get(id)?.name ?? null, [byId]);
  const changed = useCallback((nf: Finding) => setFindings((fs) => fs.map((x) => (x.id === nf.id ? nf : x))), []);
  // The run's older findings, through the findings list of the run (newest first): pages until
  // one holds findings not shown yet, or none is left.
  const showOlder = useCallback(async () => {
    setOlder({ busy: true });
    try {
      let got: Finding[] = [];
      const held = new Set(findingsNow.current.map((f) => f.id));
      while (olderCursor.current !== null && !got.length) {
        const page = await api.findings(session, { run_id: runId, state: 'all', include_quiet: true, limit: OLDER_PAGE, ...(olderCursor.current ? { cursor: olderCursor.current } : {}) });
        olderCursor.current = page.next_cursor;
        got = page.findings.flatMap(({ related, ...head }) => [head, ...related]).filter((f) => !held.has(f.id));
      }
      setFindings((fs) => mergeFindings(fs, got));
      setOlder({ busy: false });
    } catch (err) {
      setOlder({ busy: false, error: failure(err) });
    }
  }, [session, runId]);
  const [findingsShown, setFindingsShown] = useState(FINDINGS_PAGE);
  // A link to a finding older than those read first (the newest 500): older ones are read until it is there.
  const seeking = !!wantedFinding && !!detail && findingsTotal > findings.length && olderCursor.current !== null && !older.error && !findings.some((f) => f.id === wantedFinding);
  useEffect(() => {
    if (seeking && !older.busy) void showOlder();
  }, [seeking, older.busy, showOlder]);

  // The span shown whole: as listed when nothing of it was cut, else read alone (a run of large
  // outputs is listed in kilobytes, and only the span looked at is read whole).
  const listed = wantedSpan ? byId.get(wantedSpan) : undefined;
  const listedWhole = listed && !listed.truncated ? listed : null;
  const [fetched, setFetched] = useState<{ runId: string; spanId: string; span: Span | null; error?: string } | null>(null);
  useEffect(() => {
    if (!wantedSpan || listedWhole) return;
    let live = true;
    api.span(session, runId, wantedSpan).then(
      (r) => live && setFetched({ runId, spanId: wantedSpan, span: r.span }),
      (err) => live && setFetched({ runId, spanId: wantedSpan, span: null, ...(err instanceof ApiFailure && err.status === 404 ? {} : { error: failure(err) }) }),
    );
    return () => {
      live = false;
    };
    // !!listed: a span not in the run when asked may be listed later (a run still going).
  }, [session, runId, wantedSpan, !!listedWhole, !!listed]);
  const read = fetched && fetched.runId === runId && fetched.spanId === wantedSpan ? fetched : null;

  if (error) return <main id="main"><h1>Run <Ext>{runId}</Ext></h1><p role="alert" className="error">{error}</p></main>;
  if (!detail) return <main id="main"><h1>Run <Ext>{runId}</Ext></h1><p aria-busy="true">Loading…</p></main>;
  const { run } = detail;
  const span = selected >= 0 ? rows[selected].span : null;
  const whole = listedWhole ?? read?.span ?? null;
  // The first cards, and the one a link names wherever it is.
  const cards = Math.max(findingsShown, findings.findIndex((f) => f.id === wantedFinding) + 1);

  return (
    <main id="main" className="run-page">
      <header className="run-head">
        <h1>
          Run <code><Ext>{run.run_id}</Ext></code>
        </h1>
        <p className="meta">
          {run.workflow ? <Ext>{run.workflow}</Ext> : 'no workflow'}
          {run.session_id && <> · session <Ext>{run.session_id}</Ext></>} · started {when(run.started_at)} ·{' '}
          {run.end_status ? <span className={`badge end-${run.end_status}`}>{run.end_status}</span> : 'running'}
          {run.ended_at && <> after {duration(Date.parse(run.ended_at) - Date.parse(run.started_at))}</>} · {count(run.span_count, 'span')}
          {run.error_count > 0 && <span className="error"> · {count(run.error_count, 'error')}</span>} · {run.total_tokens} tokens ·{' '}
          <Link to={`${base}/runs`}>all runs</Link>
        </p>
        {follow && (
          <p className={`follow ${follow.state}`} role="status" aria-label="Following the run">
            {follow.state === 'ended' ? (
              <>Run ended — stopped following at {clock(follow.at)}</>
            ) : (
              <>
                <span className="follow-dot" aria-hidden="true" /> Live — updated {clock(follow.at)}
                {follow.error && <span className="error"> · could not update ({follow.error}); trying again</span>}
              </>
            )}
          </p>
        )}
      </header>
      <div className="run-grid">
        <section className="timeline" aria-label="Spans">
          <h2>
            Spans <span className="meta">({spans.length}{more ? ' so far' : spansError ? ` of ${run.stored_span_count}` : ''}; ↑ ↓ to move)</span>
          </h2>
          {spansError && (
            <p role="alert" className="error">
              The spans after the first {spans.length} could not be loaded: {spansError}. Reload the page to try again.
            </p>
          )}
          {run.spans_expired_at && (
            <p className="meta" role="note">
              The spans of this run were deleted by retention on {when(run.spans_expired_at)}. Its counts and findings are kept.
            </p>
          )}
          {!(run.spans_expired_at && spans.length === 0) && (
            <VirtualList
              id="spans"
              label="Spans in order"
              count={rows.length}
              rowKey={rowKey}
              rowHeight={ROW}
              selected={selected}
              onSelect={(i) => show(rows[i].span.span_id)}
              rowLabel={(i) => spanLabel(rows[i].span, citing.get(rows[i].span.span_id))}
              renderRow={(i) => <SpanRow span={rows[i].span} depth={rows[i].depth} range={range} cited={citing.get(rows[i].span.span_id)} />}
            />
          )}
        </section>
        <aside className="side">
          <section aria-label="Selected span" className="span-detail">
            {whole && span ? (
              <SpanDetail span={whole} findings={citing.get(span.span_id) ?? []} allFindings={findings} />
            ) : span ? (
              <SpanDetail span={span} findings={citing.get(span.span_id) ?? []} allFindings={findings} bodies={read?.error ?? 'loading'} />
            ) : wantedSpan && read?.span ? (
              // Read alone before the page of spans that lists it came (a long run's last span).
              <SpanDetail span={read.span} findings={citing.get(wantedSpan) ?? []} allFindings={findings} />
            ) : wantedSpan && read?.error ? (
              <p role="alert" className="error">
                Span <code><Ext>{wantedSpan}</Ext></code> could not be loaded: {read.error}
              </p>
            ) : wantedSpan && read ? (
              <p role="alert">
                Span <code><Ext>{wantedSpan}</Ext></code> is not in this run.
              </p>
            ) : wantedSpan ? (
              <p className="meta" aria-busy="true">
                Looking for span <code><Ext>{wantedSpan}</Ext></code>…
              </p>
            ) : seeking ? (
              <p className="meta" aria-busy="true">
                Looking for finding <code><Ext>{wantedFinding}</Ext></code> among the older findings…
              </p>
            ) : wantedFinding && !findings.some((f) => f.id === wantedFinding) ? (
              <p role="alert">
                Finding <code><Ext>{wantedFinding}</Ext></code> is not in this run.
              </p>
            ) : (
              <p className="meta">Select a span to see its input and output.</p>
            )}
          </section>
          <section aria-labelledby="findings-h">
            <h2 id="findings-h">Findings ({Math.max(findingsTotal, findings.length)})</h2>
            {findingsTotal > findings.length && (
              <p className="meta findings-cut" role="note">
                Showing the newest {findings.length} of {findingsTotal} findings.{' '}
                {olderCursor.current !== null && (
                  <button type="button" onClick={() => void showOlder()} disabled={older.busy}>
                    {older.busy ? 'Loading…' : 'Show older findings'}
                  </button>
                )}
                {older.error && <span role="alert" className="error"> Could not load them: {older.error}</span>}
              </p>
            )}
            {detail.questions_pending > 0 && (
              <p className="meta questions-pending" role="status">
                {count(detail.questions_pending, 'question')} waiting for the model: this run is not done being checked.
              </p>
            )}
            {findings.length === 0 && <p className="empty">{detail.questions_pending > 0 ? 'No check raised anything on this run yet.' : 'No check raised anything on this run.'}</p>}
            {findings.slice(0, cards).map((f) => (
              <FindingCard key={f.id} session={session} finding={f} spanName={spanName} onShowSpan={show} onChange={changed} />
            ))}
            {findings.length > cards && (
              <p className="meta">
                {cards} of {findings.length} shown.{' '}
                <button type="button" onClick={() => setFindingsShown((n) => n + FINDINGS_PAGE)}>
                  Show more
                </button>
              </p>
            )}
          </section>
          {detail.not_checked.length > 0 && (
            <section aria-labelledby="not-checked-h" className="not-checked">
              <h2 id="not-checked-h">Not checked ({detail.not_checked.length})</h2>
              <p className="meta">Questions no model could answer on this run. They are not a pass: nobody knows yet.</p>
              <ul className="plain">
                {detail.not_checked.map((n) => (
                  <li key={`${n.check_id}:${n.anchor}:${n.at}`}>
                    <code><Ext>{n.check_id}</Ext></code>{' '}
                    {n.anchor === 'run' ? (
                      <span className="meta">about the run</span>
                    ) : (
                      <button type="button" className="link" onClick={() => show(n.anchor)}>
                        <Ext>{byId.get(n.anchor)?.name ?? n.anchor}</Ext>
                      </button>
                    )}{' '}
                    <span className="meta">· {when(n.at)}</span>
                    {n.reason && <div className="meta"><Ext text>{n.reason}</Ext></div>}
                  </li>
                ))}
              </ul>
            </section>
          )}
          {run.final_output !== undefined && run.final_output !== null && (
            <section aria-labelledby="final-h">
              <h2 id="final-h">Final output</h2>
              <pre className="text">
                <Highlight text={asText(run.final_output)} quote={findings.find((f) => f.quote && asText(run.final_output).includes(f.quote))?.quote} />
              </pre>
            </section>
          )}
        </aside>
      </div>
    </main>
  );
}

function spanLabel(s: Span, cited?: Finding[]): string {
  const parts = [s.name, s.type, s.status === 'error' ? 'error' : '', duration(spanMs(s))];
  if (cited?.length) parts.push(`${count(cited.length, 'finding')}: ${cited.map((f) => f.title).join('; ')}`);
  return parts.filter(Boolean).join(', ');
}

function spanMs(s: Span): number | undefined {
  return s.start_ms !== undefined && s.end_ms !== undefined ? s.end_ms - s.start_ms : undefined;
}

function SpanRow({ span, depth, range, cited }: { span: Span; depth: number; range: { start: number; end: number } | null; cited?: Finding[] }) {
  const ms = spanMs(span);
  const total = range ? range.end - range.start : 0;
  const left = range && span.start_ms !== undefined ? ((span.start_ms - range.start) / total) * 100 : 0;
  const width = range && ms !== undefined ? Math.max(0.4, (ms / total) * 100) : 0;
  return (
    <div className={`span-row${span.status === 'error' ? ' is-error' : ''}`}>
      <span className="span-name" style={{ paddingLeft: 4 + Math.min(depth, 12) * 14 }}>
        {span.status === 'error' && (
          <span className="err-mark" aria-hidden="true" title="error">
            ✕
          </span>
        )}
        <span className="type">{span.type}</span> <Ext>{span.name}</Ext>
      </span>
      <span className="bar-track" aria-hidden="true">
        {width > 0 && <span className="bar" style={{ left: `${left}%`, width: `${Math.min(width, 100 - left)}%` }} />}
      </span>
      <span className="dur">{duration(ms)}</span>
      <span className="cited">
        {cited && cited.length > MARKERS ? (
          <span className={`marker state-${mostPressing(cited)}`} title={shown(cited.map((f) => f.title).join('\n'))} data-finding-markers={cited.length}>
            ⚑ {cited.length}
          </span>
        ) : (
          cited?.map((f) => (
            <span key={f.id} className={`marker state-${f.state}`} title={shown(f.title)} data-finding-marker={f.id}>
              ⚑
            </span>
          ))
        )}
      </span>
    </div>
  );
}

/**
 * A span's detail. `bodies`: its input and output are not here yet (`loading`, the span as
 * listed, cut) or could not be read (why): said in their place.
 */
function SpanDetail({ span, findings, allFindings, bodies }: { span: Span; findings: Finding[]; allFindings: Finding[]; bodies?: string }) {
  const fields: [string, unknown][] = [
    ['Input', span.input],
    ['Output', span.output],
    ['Error', span.error],
  ];
  // The quote of a finding on this span, or of any question finding whose words are in it.
  const texts = fields.map(([, v]) => asText(v));
  const quote = [...findings, ...allFindings].find((f) => f.quote && texts.some((t) => t.includes(f.quote!)))?.quote ?? null;
  return (
    <>
      <h2>
        {span.status === 'error' && <span className="error">✕ </span>}
        <Ext>{span.name}</Ext>
      </h2>
      <p className="meta">
        {span.type}
        {span.tool && <> · tool <Ext>{span.tool}</Ext></>}
        {span.model && <> · model <Ext>{span.model}</Ext></>} · {span.status} · {duration(spanMs(span))} · <code><Ext>{span.span_id}</Ext></code>
      </p>
      {findings.map((f) => (
        <p key={f.id} className="cited-by">
          ⚑ <Ext>{f.title}</Ext> <StateBadge state={f.state} />
          {f.confidence && <> · <Ext>{f.confidence}</Ext></>}
        </p>
      ))}
      {bodies === 'loading' && (
        <p className="meta" aria-busy="true">
          Loading its input and output…
        </p>
      )}
      {bodies !== undefined && bodies !== 'loading' && (
        <p role="alert" className="error">
          Its input and output could not be loaded: {bodies}
        </p>
      )}
      {bodies === undefined && fields.map(([label, v], i) =>
        v === undefined || v === null || v === '' ? null : (
          <details key={label} open={label !== 'Input' || texts[i].length < 2000}>
            <summary>{label}</summary>
            <pre className="text">
              <Highlight text={texts[i]} quote={quote} />
            </pre>
          </details>
        ),
      )}
    </>
  );
}
