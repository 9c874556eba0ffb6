import { api } from '../api';
import { Ext } from '../components/Ext';
import { when } from '../format';
import { useLoad } from '../load';
import { Link, type Where } from '../router';
import { apiFilters, ListState, Pager, TimeRangeAndSubmit, useUrlFilters } from '../url-filters';
import type { Session } from '../session';

/** The list's filters and paging, as they stand in the URL (times as the form gives them, local). */
const FILTERS = ['workflow', 'session_id', 'end_status', 'has_open_findings', 'from', 'to', 'limit', 'cursor'] as const;

/**
 * Runs, newest first, with the API's filters (workflow, session, end status, open problems,
 * start time) and cursor paging; every filter and page is in the URL, so a link opens the same
 * list.
 */
export function Runs({ session, base, where }: { session: Session; base: string; where: Where }) {
  const { params, field, submit } = useUrlFilters(FILTERS, where, `${base}/runs`);
  const runs = useLoad(() => api.runs(session, apiFilters(params)), [session, where.query.toString()]);

  const next = runs.data?.next_cursor;

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
      <ListState error={runs.error} empty={!!runs.data && runs.data.runs.length === 0} noun="runs" paged={!!params.cursor} />
      {runs.data && runs.data.runs.length > 0 && (
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
              {runs.data.runs.map((r) => (
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
