import { api } from '../api';
import { percent, when } from '../format';
import { useLoad } from '../load';
import type { Session } from '../session';
import type { CheckStat, DisabledCheck } from '../types';

/**
 * Checks: each check with findings in the project (how often dismissed, its precision,
 * whether it went quiet or should be retired), and the match checks disabled for a slow pattern.
 */
export function Checks({ session }: { session: Session }) {
  const data = useLoad(async () => {
    const [stats, disabled] = await Promise.all([api.checkStats(session), api.disabledChecks(session)]);
    return merge(stats.checks, disabled.checks);
  }, [session]);
  return (
    <main id="main">
      <h1>Checks</h1>
      <p className="meta">Checks that raised findings in this project, and those switched off for a slow pattern.</p>
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {data.data && data.data.length === 0 && <p className="empty">No check has raised a finding here yet.</p>}
      {data.data && data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">Source</th>
              <th scope="col" className="num">Findings</th>
              <th scope="col" className="num">Dismissed</th>
              <th scope="col" className="num">Precision</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {data.data.map(({ id, stat, disabled }) => (
              <tr key={id}>
                <td>
                  <code>{id}</code>
                </td>
                <td>{disabled?.source ?? '—'}</td>
                <td className="num">{stat?.findings ?? 0}</td>
                <td className="num">{stat?.dismissals ?? 0}</td>
                <td className="num">{percent(stat?.precision)}</td>
                <td>
                  {disabled && (
                    <span className="badge warn" title={`${disabled.reason} (pattern ${disabled.pattern}, since ${when(disabled.since)})`}>
                      Disabled: slow pattern ({disabled.ms} ms over {disabled.limit_ms} ms)
                    </span>
                  )}{' '}
                  {stat?.quiet && <span className="badge quiet">Quiet (dismissed 3 times)</span>} {stat?.retire_suggested && <span className="badge warn">Retirement suggested</span>}
                  {!disabled && !stat?.quiet && !stat?.retire_suggested && 'Running'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

function merge(stats: CheckStat[], disabled: DisabledCheck[]) {
  const ids = [...new Set([...stats.map((s) => s.check_id), ...disabled.map((d) => d.check_id)])].sort();
  return ids.map((id) => ({ id, stat: stats.find((s) => s.check_id === id), disabled: disabled.find((d) => d.check_id === id) }));
}
