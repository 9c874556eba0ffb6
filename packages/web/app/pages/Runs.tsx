import { useEffect, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { when } from '../format';
import { useLoad } from '../load';
import { Link, type Where } from '../router';
import { apiFilters, ListState, Pager, TimeRangeAndSubmit, useUrlFilters } from '../url-filters';
import type { Session } from '../session';
import type { Page, Run } from '../types';

/** The list's filters and paging, as they stand in the URL (times as the form gives them, local). */
const FILTERS = ['workflow', 'session_id', 'end_status', 'has_open_findings', 'from', 'to', 'limit', 'cursor'] as const;
/** The first page is read again this often while the tab is visible: newer runs are offered, not shown under the pointer. */
const RECHECK_MS = 10_000;

type RunsPage = { runs: Run[] } & Page;

/**
 * Runs, newest first, with the API's filters (workflow, session, end status, open problems,
 * start time) and cursor paging; every filter and page is in the URL, so a link opens the same
 * list.
 */
export function Runs({ session, base, where }: { session: Session; base: string; where: Where }) {
  const { params, field, submit } = useUrlFilters(FILTERS, where, `${base}/runs`);
  const runs = useLoad(() => api.runs(session, apiFilters(params)), [session, where.query.toString()]);
  /** The first page as read again since the list was loaded (`base`), and the one the user chose to show. */
  const [later, setLater] = useState<{ base: RunsPage; page: RunsPage } | null>(null);
  const [chosen, setChosen] = useState<{ base: RunsPage; page: RunsPage } | null>(null);
  const data = runs.data && chosen?.base === runs.data ? chosen.page : runs.data;

  // On the first page, the same page is read again every few seconds (one request) while the
  // tab is visible; what changed is offered above the list, which stays as it is until asked.
  const loaded = !params.cursor ? runs.data : null;
  useEffect(() => {
    if (!loaded) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const again = () => {
      clearTimeout(timer);
      if (!stopped && !document.hidden) timer = setTimeout(() => void look(), RECHECK_MS);
    };
    const look = async () => {
      try {
        const page = await api.runs(session, apiFilters(params));
        if (!stopped) setLater({ base: loaded, page });
      } catch {
        // Said nowhere: the list shown stays, and the next look may do better.
      }
      again();
    };
    const shown = () => (document.hidden ? clearTimeout(timer) : again());
    document.addEventListener('visibilitychange', shown);
    again();
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', shown);
    };
  }, [session, loaded]);
  const fresh = runs.data && later?.base === runs.data ? later.page : null;
  const listed = new Set(data?.runs.map((r) => r.run_id));
  const newer = fresh ? fresh.runs.filter((r) => !listed.has(r.run_id)).length : 0;
  // Filtered to running runs: those no longer on the page ended. On a full page (more after it),
  // one missing may only have moved to the next page, pushed by newer runs: ended only if it
  // would still come before the page's last run (newest first, by start, then run id).
  const inFresh = new Set(fresh?.runs.map((r) => r.run_id));
  const last = fresh?.next_cursor ? fresh.runs[fresh.runs.length - 1] : undefined;
  const before = (a: Run, b: Run) => {
    const ta = Date.parse(a.started_at);
    const tb = Date.parse(b.started_at);
    return ta !== tb ? ta > tb : a.run_id > b.run_id;
  };
  const ended = fresh && params.end_status === 'running' ? (data?.runs.filter((r) => !inFresh.has(r.run_id) && (!last || before(r, last))).length ?? 0) : 0;

  const next = data?.next_cursor;

  return (
    <main id="main">
      <h1>Runs</h1>
      <form className="filters" onSubmit={submit} aria-label="Filter runs">
        <label>
          Workflow
          <input {...field('workflow')} placeholder="any" />
        </label>
        <label>
          Session
          <input {...field('session_id')} placeholder="any" />
        </label>
        <label>
          End
          <select {...field('end_status')}>
            <option value="">any</option>
            <option value="running">running (not ended)</option>
            <option value="ok">ok</option>
            <option value="error">error</option>
            <option value="no_output">no output</option>
            <option value="interrupted">interrupted</option>
          </select>
        </label>
        <label>
          Open problems
          <select {...field('has_open_findings')}>
            <option value="">any</option>
            <option value="true">with open problems</option>
            <option value="false">without</option>
          </select>
        </label>
        <TimeRangeAndSubmit fromLabel="Started from" field={field} />
      </form>
      {runs.loading && <p aria-busy="true">Loading…</p>}
      <p role="status" className="meta" aria-label="Newer runs">
        {fresh && (newer > 0 || ended > 0) && (
          <>
            {[newer > 0 ? (newer >= fresh.runs.length && fresh.next_cursor ? `${newer}+ new runs` : newer === 1 ? '1 new run' : `${newer} new runs`) : '', ended > 0 ? `${ended} ended` : '']
              .filter(Boolean)
              .join(', ')}{' '}
            —{' '}
            <button type="button" onClick={() => runs.data && setChosen({ base: runs.data, page: fresh })}>
              Show
            </button>
          </>
        )}
      </p>
      <ListState error={runs.error} empty={!!data && data.runs.length === 0} noun="runs" paged={!!params.cursor} />
      {data && data.runs.length > 0 && (
        <div className="scroll-x">
          <table className="runs">
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Workflow</th>
                <th scope="col">Session</th>
                <th scope="col">Started</th>
                <th scope="col">End</th>
                <th scope="col" className="num">Spans</th>
                <th scope="col" className="num">Errors</th>
                <th scope="col" className="num">Open problems</th>
              </tr>
            </thead>
            <tbody>
              {data.runs.map((r) => (
                <tr key={r.run_id}>
                  <td className="id">
                    <Link to={`${base}/runs/${encodeURIComponent(r.run_id)}`}>
                      <Ext>{r.run_id}</Ext>
                    </Link>
                  </td>
                  <td className="id">{r.workflow ? <Ext>{r.workflow}</Ext> : '—'}</td>
                  <td className="id">{r.session_id ? <Ext>{r.session_id}</Ext> : '—'}</td>
                  <td>{when(r.started_at)}</td>
                  <td>{r.end_status ? <span className={`badge end-${r.end_status}`}>{r.end_status}</span> : <span className="meta">running</span>}</td>
                  <td className="num">{r.span_count}</td>
                  <td className="num">{r.error_count > 0 ? <span className="error">{r.error_count}</span> : 0}</td>
                  <td className="num">{r.open_findings > 0 ? <span className="badge state-open">{r.open_findings}</span> : 0}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager path={`${base}/runs`} params={params} next={next} label="Pages of runs" />
    </main>
  );
}
