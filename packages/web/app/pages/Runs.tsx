import { useState, type FormEvent } from 'react';
import { api } from '../api';
import { when } from '../format';
import { useLoad } from '../load';
import { href, Link, navigate, type Where } from '../router';
import type { Session } from '../session';

/**
 * Runs, newest first, with the filters the API takes (workflow, open problems) and cursor
 * paging; every filter and page is in the URL, so a link opens the same list.
 */
export function Runs({ session, base, where }: { session: Session; base: string; where: Where }) {
  const q = where.query;
  const params = {
    workflow: q.get('workflow') ?? undefined,
    has_open_findings: q.get('has_open_findings') ?? undefined,
    limit: q.get('limit') ?? undefined,
    cursor: q.get('cursor') ?? undefined,
  };
  const runs = useLoad(() => api.runs(session, params), [session, where.query.toString()]);
  const [workflow, setWorkflow] = useState(params.workflow ?? '');
  const [open, setOpen] = useState(params.has_open_findings ?? '');

  const filter = (e: FormEvent) => {
    e.preventDefault();
    navigate(href(`${base}/runs`, { workflow: workflow.trim(), has_open_findings: open, limit: params.limit }));
  };
  const next = runs.data?.next_cursor;

  return (
    <main id="main">
      <h1>Runs</h1>
      <form className="filters" onSubmit={filter} aria-label="Filter runs">
        <label>
          Workflow
          <input name="workflow" value={workflow} onChange={(e) => setWorkflow(e.target.value)} placeholder="any" />
        </label>
        <label>
          Open problems
          <select name="has_open_findings" value={open} onChange={(e) => setOpen(e.target.value)}>
            <option value="">any</option>
            <option value="true">with open problems</option>
            <option value="false">without</option>
          </select>
        </label>
        <button type="submit">Filter</button>
      </form>
      {runs.error && <p role="alert" className="error">{runs.error}</p>}
      {runs.data && runs.data.runs.length === 0 && <p className="empty">No runs{params.cursor ? ' on this page' : ''}.</p>}
      {runs.data && runs.data.runs.length > 0 && (
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
                <td>
                  <Link to={`${base}/runs/${encodeURIComponent(r.run_id)}`}>{r.run_id}</Link>
                </td>
                <td>{r.workflow ?? '—'}</td>
                <td>{r.session_id ?? '—'}</td>
                <td>{when(r.started_at)}</td>
                <td>{r.end_status ? <span className={`badge end-${r.end_status}`}>{r.end_status}</span> : <span className="meta">running</span>}</td>
                <td className="num">{r.span_count}</td>
                <td className="num">{r.error_count > 0 ? <span className="error">{r.error_count}</span> : 0}</td>
                <td className="num">{r.open_findings > 0 ? <span className="badge state-open">{r.open_findings}</span> : 0}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav className="pager" aria-label="Pages of runs">
        {params.cursor && <Link to={href(`${base}/runs`, { ...params, cursor: undefined })}>First page</Link>}
        {next && (
          <Link to={href(`${base}/runs`, { ...params, cursor: next })} rel="next">
            Next page
          </Link>
        )}
      </nav>
    </main>
  );
}
