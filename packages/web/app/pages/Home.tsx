import { api } from '../api';
import { StateBadge } from '../components/FindingCard';
import { percent, startOfToday, when } from '../format';
import { useLoad } from '../load';
import { href, Link } from '../router';
import type { Session } from '../session';
import type { CheckStat, Finding, Problem } from '../types';

/** Halted runs are read from this many pages of findings at most (newest first, so today's come first). */
const HALT_PAGES = 4;

/**
 * Home: the problems now (open findings as problems: one per group in a run, headed by the most
 * specific check), the runs halted today, and the checks that look noisy.
 */
export function Home({ session, base }: { session: Session; base: string }) {
  const problems = useLoad(() => api.findings(session, { state: 'open', limit: 200 }), [session]);
  const halted = useLoad(() => haltedToday(session), [session]);
  const stats = useLoad(() => api.checkStats(session), [session]);
  const noisy = (stats.data?.checks ?? []).filter((c) => c.retire_suggested || c.quiet || (c.precision !== null && c.precision < 0.8));

  return (
    <main id="main">
      <h1>Home</h1>
      <section aria-labelledby="problems-h">
        <h2 id="problems-h">Problems now</h2>
        {problems.error && <p role="alert" className="error">{problems.error}</p>}
        {problems.data && problems.data.findings.length === 0 && <p className="empty">No open problems.</p>}
        {problems.data && <ProblemGroups base={base} problems={problems.data.findings} />}
      </section>
      <section aria-labelledby="halted-h">
        <h2 id="halted-h">Runs halted today</h2>
        {halted.error && <p role="alert" className="error">{halted.error}</p>}
        {halted.data && halted.data.length === 0 && <p className="empty">No run was halted today.</p>}
        <ul className="plain">
          {halted.data?.map((f) => (
            <li key={f.run_id}>
              <Link to={`${base}/runs/${encodeURIComponent(f.run_id)}`}>{f.run_id}</Link> {f.workflow && <span className="meta">{f.workflow}</span>} · {f.title} ·{' '}
              <span className="meta">{when(f.raised_at)}</span>
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="noisy-h">
        <h2 id="noisy-h">Checks that look noisy</h2>
        {stats.error && <p role="alert" className="error">{stats.error}</p>}
        {stats.data && noisy.length === 0 && <p className="empty">No check has been dismissed often.</p>}
        {noisy.length > 0 && <NoisyTable checks={noisy} base={base} />}
      </section>
    </main>
  );
}

/** The library's groups first, in the seed's order; then other groups; then checks with none. */
const GROUP_ORDER = ['loop', 'ending', 'tool-result'];

function ProblemGroups({ problems, base }: { problems: Problem[]; base: string }) {
  const byGroup = new Map<string, Problem[]>();
  for (const p of problems) {
    const g = p.group ?? '';
    const list = byGroup.get(g);
    if (list) list.push(p);
    else byGroup.set(g, [p]);
  }
  const rank = (g: string) => (g === '' ? 1e9 : GROUP_ORDER.includes(g) ? GROUP_ORDER.indexOf(g) : 100);
  const groups = [...byGroup.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return (
    <>
      {groups.map((g) => (
        <section key={g} className="group" aria-label={g ? `Group ${g}` : 'Other problems'}>
          <h3>{g ? `Group: ${g}` : 'Other problems'}</h3>
          <ul className="problems">
            {byGroup.get(g)!.map((p) => (
              <li key={p.id} className="problem">
                <div>
                  <Link to={href(`${base}/runs/${encodeURIComponent(p.run_id)}`, { finding: p.id })}>
                    <strong>{p.title}</strong>
                  </Link>{' '}
                  <StateBadge state={p.state} /> {p.action === 'halt' && <span className="badge halt">halt</span>}
                </div>
                <div className="meta">
                  run {p.run_id}
                  {p.workflow && <> · {p.workflow}</>} · {p.check_id} · {when(p.raised_at)}
                </div>
                {p.related.length > 0 && (
                  <div className="related">
                    also in this problem:{' '}
                    {[...p.related]
                      .sort((a, b) => b.priority - a.priority)
                      .map((r) => r.title)
                      .join('; ')}
                  </div>
                )}
              </li>
            ))}
          </ul>
        </section>
      ))}
    </>
  );
}

function NoisyTable({ checks, base }: { checks: CheckStat[]; base: string }) {
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Check</th>
          <th scope="col">Findings</th>
          <th scope="col">Dismissed</th>
          <th scope="col">Precision</th>
          <th scope="col"></th>
        </tr>
      </thead>
      <tbody>
        {checks.map((c) => (
          <tr key={c.check_id}>
            <td>
              <Link to={`${base}/checks`}>
                <code>{c.check_id}</code>
              </Link>
            </td>
            <td className="num">{c.findings}</td>
            <td className="num">{c.dismissals}</td>
            <td className="num">{percent(c.precision)}</td>
            <td>
              {c.retire_suggested && <span className="badge warn">Retirement suggested</span>} {c.quiet && <span className="badge quiet">Quiet</span>}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * Runs a halt reached today: findings of halt checks whose halt was sent (not suppressed), read
 * newest first until the first one raised before today. One per run.
 */
async function haltedToday(session: Session): Promise<Finding[]> {
  const since = startOfToday().getTime();
  const runs = new Map<string, Finding>();
  let cursor: string | null = null;
  for (let page = 0; page < HALT_PAGES; page++) {
    const r = await api.findings(session, { state: 'all', limit: 500, cursor });
    let older = false;
    for (const p of r.findings) {
      if (Date.parse(p.raised_at) < since) older = true;
      for (const f of [p, ...p.related]) {
        if (f.action === 'halt' && !f.halt_suppressed && Date.parse(f.raised_at) >= since && !runs.has(f.run_id)) runs.set(f.run_id, f);
      }
    }
    cursor = r.next_cursor;
    if (older || !cursor) break;
  }
  return [...runs.values()];
}
