import { api } from '../api';
import { Ext } from '../components/Ext';
import { shown, when } from '../format';
import { useLoad } from '../load';
import { Link, type Where } from '../router';
import { apiFilters, ListState, Pager, TimeRangeAndSubmit, useUrlFilters } from '../url-filters';
import type { Session } from '../session';
import { ResultBadge } from '../components/SopBadges';

/** The list's filters and paging, as they stand in the URL (the API's own names). */
const FILTERS = ['agent', 'procedure', 'result', 'release', 'rule', 'from', 'to', 'limit', 'cursor'] as const;

/**
 * Sessions checked against the procedures, newest first, with the API's filters and cursor
 * paging; every filter and page is in the URL, so a link opens the same list.
 */
export function Sessions({ session, base, where }: { session: Session; base: string; where: Where }) {
  const { params, field, submit } = useUrlFilters(FILTERS, where, `${base}/sessions`);
  const list = useLoad(() => api.sopSessions(session, apiFilters(params)), [session, where.query.toString()]);
  const next = list.data?.next_cursor;

  return (
    <main id="main">
      <h1>Sessions</h1>
      <form className="filters" onSubmit={submit} aria-label="Filter sessions">
        <label>
          Agent
          <input {...field('agent')} placeholder="any" />
        </label>
        <label>
          Procedure
          <input {...field('procedure')} placeholder="any (id)" />
        </label>
        <label>
          Result
          <select {...field('result')}>
            <option value="">any</option>
            <option value="deviated">deviated</option>
            <option value="partial">partial</option>
            <option value="followed">followed</option>
            <option value="not_measurable">not measurable</option>
          </select>
        </label>
        <label>
          Release
          <input {...field('release')} placeholder="any (id)" size={10} />
        </label>
        <label>
          Rule
          <input {...field('rule')} placeholder="any (rule id)" size={12} />
        </label>
        <TimeRangeAndSubmit fromLabel="Received from" field={field} />
      </form>
      {list.loading && <p aria-busy="true">Loading…</p>}
      <ListState error={list.error} empty={!!list.data && list.data.items.length === 0} noun="sessions" paged={!!params.cursor} />
      {list.data && list.data.items.length > 0 && (
        <div className="scroll-x">
          <table className="sessions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Agent</th>
                <th scope="col">Received</th>
                <th scope="col">Status</th>
                <th scope="col">Result</th>
              </tr>
            </thead>
            <tbody>
              {list.data.items.map((s) => (
                <tr key={s.id}>
                  <td className="id">
                    <Link to={`${base}/sessions/${encodeURIComponent(s.id)}`}>
                      <Ext>{s.external_id ?? s.id}</Ext>
                    </Link>
                  </td>
                  <td className="id">{s.agent ? <Ext>{s.agent}</Ext> : '—'}</td>
                  <td>{when(s.received_at)}</td>
                  <td>
                    <span className={`badge status-${s.status}`}>{s.status}</span>
                    {s.status === 'failed' && s.error && (
                      <div className="error">
                        <Ext text>{s.error}</Ext>
                      </div>
                    )}
                    {/* Checked, but the model failed on some questions on its last try: their rules are not_checked (the session page says more). */}
                    {s.status === 'checked' && s.error && (
                      <>
                        {' '}
                        <span className="badge warn" title={shown(s.error)}>
                          not every rule checked
                        </span>
                      </>
                    )}
                  </td>
                  <td>
                    <ResultBadge result={s.result} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager path={`${base}/sessions`} params={params} next={next} label="Pages of sessions" />
    </main>
  );
}
