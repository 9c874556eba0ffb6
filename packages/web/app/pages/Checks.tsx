import { api } from '../api';
import { percent, when } from '../format';
import { useLoad } from '../load';
import type { Session } from '../session';
import type { CheckStat, DisabledCheck, Finding } from '../types';

/** Where a check came from and what it does, read from its findings (pages of 500, this many at most). */
const FINDING_PAGES = 4;

/**
 * Checks: each check with findings in the project (how often dismissed, its precision,
 * whether it went quiet or should be retired), and the match checks disabled for a slow pattern.
 */
export function Checks({ session }: { session: Session }) {
  const data = useLoad(async () => {
    const [stats, disabled, seen] = await Promise.all([api.checkStats(session), api.disabledChecks(session), checksSeen(session)]);
    return merge(stats.checks, disabled.checks, seen);
  }, [session]);
  return (
    <main id="main">
      <h1>Checks</h1>
      <p className="meta">Checks that raised findings in this project (source and action as their findings say), and those switched off for a slow pattern.</p>
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {data.data && data.data.length === 0 && <p className="empty">No check has raised a finding here yet.</p>}
      {data.data && data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">Source</th>
              <th scope="col">Action</th>
              <th scope="col" className="num">Findings</th>
              <th scope="col" className="num">Dismissed</th>
              <th scope="col" className="num">Precision</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {data.data.map(({ id, stat, disabled, seen }) => (
              <tr key={id}>
                <td>
                  <code>{id}</code>
                </td>
                <td>{seen?.check_source ?? disabled?.source ?? '—'}</td>
                <td>{seen ? <span className={seen.action === 'halt' ? 'badge halt' : 'badge'}>{seen.action}</span> : '—'}</td>
                <td className="num">{stat?.findings ?? 0}</td>
                <td className="num">{stat?.dismissals ?? 0}</td>
                <td className="num">{percent(stat?.precision)}</td>
                <td>
                  <div className="states">
                  {disabled && (
                    <span className="badge warn" title={`${disabled.reason} (pattern ${disabled.pattern}, since ${when(disabled.since)})`}>
                      Disabled: slow pattern ({disabled.ms} ms over {disabled.limit_ms} ms)
                    </span>
                  )}
                  {stat?.quiet && <span className="badge quiet">Quiet (dismissed 3 times)</span>}
                  {stat?.retire_suggested && <span className="badge warn">Retirement suggested</span>}
                  {!disabled && !stat?.quiet && !stat?.retire_suggested && 'Running'}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

function merge(stats: CheckStat[], disabled: DisabledCheck[], seen: Map<string, Finding>) {
  const ids = [...new Set([...stats.map((s) => s.check_id), ...disabled.map((d) => d.check_id)])].sort();
  return ids.map((id) => ({ id, stat: stats.find((s) => s.check_id === id), disabled: disabled.find((d) => d.check_id === id), seen: seen.get(id) }));
}

/**
 * The newest finding of each check, quiet and grouped ones included: the stats do not say a
 * check's source or action, its findings do.
 */
async function checksSeen(session: Session): Promise<Map<string, Finding>> {
  const seen = new Map<string, Finding>();
  let cursor: string | null = null;
  for (let page = 0; page < FINDING_PAGES; page++) {
    const r = await api.findings(session, { state: 'all', include_quiet: true, limit: 500, cursor });
    for (const p of r.findings) for (const f of [p, ...p.related]) if (!seen.has(f.check_id)) seen.set(f.check_id, f);
    cursor = r.next_cursor;
    if (!cursor) break;
  }
  return seen;
}
