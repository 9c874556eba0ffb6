import { Fragment, useEffect, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { StateBadge } from '../components/FindingCard';
import { percent, shown, startOfToday, when } from '../format';
import { haltsSince, type Halts } from '../halts';
import { failure, passing, retrying, useLoad, useRetryAfter503 } from '../load';
import { href, Link } from '../router';
import type { Session } from '../session';
import type { CheckStat, Problem } from '../types';

/** Halted runs are read from this many pages of problems at most (HALT_PAGE each). */
const HALT_PAGES = 4;
const HALT_PAGE = 500;
/** Open problems are read this many at a time, newest first: **Show more** reads the next ones. */
const PROBLEMS_PAGE = 200;

/**
 * Home: the problems now (open findings as problems: one per group in a run, headed by the most
 * specific check), the runs halted today, and the checks that look noisy.
 */
export function Home({ session, base }: { session: Session; base: string }) {
  const problems = useOpenProblems(session);
  const halted = useLoad(() => haltedToday(session), [session]);
  const stats = useLoad(() => api.checkStats(session), [session]);
  const noisy = (stats.data?.checks ?? []).filter((c) => c.retire_suggested || c.quiet || (c.precision !== null && c.precision < 0.8));

  return (
    <main id="main">
      <h1>Home</h1>
      <section aria-labelledby="problems-h">
        <h2 id="problems-h">Problems now</h2>
        {problems.loading && !problems.list && <p aria-busy="true">Loading…</p>}
        {problems.list && problems.list.length === 0 && <p className="empty">No open problems.</p>}
        {problems.list && problems.list.length > 0 && (
          <p className="meta" aria-live="polite">
            {problems.more ? `The newest ${problems.list.length} open problems; older ones follow.` : `All ${problems.list.length} open problem${problems.list.length === 1 ? '' : 's'}.`}
          </p>
        )}
        {problems.list && <ProblemGroups base={base} problems={problems.list} />}
        {problems.error && <p role="alert" className="error">{problems.error}</p>}
        {problems.more && (
          <button type="button" onClick={problems.showMore} disabled={problems.loading}>
            {problems.loading ? 'Loading…' : `Show ${PROBLEMS_PAGE} more`}
          </button>
        )}
      </section>
      <section aria-labelledby="halted-h">
        <h2 id="halted-h">Runs halted today</h2>
        {halted.loading && <p aria-busy="true">Loading…</p>}
        {halted.error && <p role="alert" className="error">{halted.error}</p>}
        {halted.data && halted.data.runs.length === 0 && <p className="empty">No run was halted today{halted.data.partial ? ' among the problems read' : ''}.</p>}
        {halted.data?.partial && (
          <p className="meta" role="note">
            Read from the newest {HALT_PAGES * HALT_PAGE} problems only: a run halted today under an older problem may be missing.
          </p>
        )}
        <ul className="plain">
          {halted.data?.runs.map((f) => (
            <li key={f.run_id}>
              <Link to={`${base}/runs/${encodeURIComponent(f.run_id)}`}>
                <Ext>{f.run_id}</Ext>
              </Link>{' '}
              {f.workflow && (
                <span className="meta">
                  <Ext>{f.workflow}</Ext>
                </span>
              )}{' '}
              · <Ext>{f.title}</Ext> ·{' '}
              <span className="meta">{when(f.raised_at)}</span>
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="noisy-h">
        <h2 id="noisy-h">Checks that look noisy</h2>
        {stats.loading && <p aria-busy="true">Loading…</p>}
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
        <section key={g} className="group" aria-label={g ? `Group ${shown(g)}` : 'Other problems'}>
          <h3>{g ? <>Group: <Ext>{g}</Ext></> : 'Other problems'}</h3>
          <ul className="problems">
            {byGroup.get(g)!.map((p) => (
              <li key={p.id} className="problem">
                <div>
                  <Link to={href(`${base}/runs/${encodeURIComponent(p.run_id)}`, { finding: p.id })}>
                    <strong>
                      <Ext>{p.title}</Ext>
                    </strong>
                  </Link>{' '}
                  <StateBadge state={p.state} /> {p.action === 'halt' && <span className="badge halt">halt</span>}
                </div>
                <div className="meta">
                  run <Ext>{p.run_id}</Ext>
                  {p.workflow && <> · <Ext>{p.workflow}</Ext></>} · <Ext>{p.check_id}</Ext> · {when(p.raised_at)}
                </div>
                {p.related.length > 0 && (
                  <div className="related">
                    also in this problem:{' '}
                    {[...p.related]
                      .sort((a, b) => b.priority - a.priority)
                      .map((r, i) => (
                        <Fragment key={r.id}>
                          {i > 0 && '; '}
                          <Ext>{r.title}</Ext>
                        </Fragment>
                      ))}
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
    <div className="scroll-x">
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
                  <code>
                    <Ext>{c.check_id}</Ext>
                  </code>
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
    </div>
  );
}

/** Runs a halt reached today (since midnight, the browser's time), from every page of problems up to the cap. */
function haltedToday(session: Session): Promise<Halts> {
  return haltsSince((cursor) => api.findings(session, { state: 'all', limit: HALT_PAGE, cursor }), startOfToday().getTime(), HALT_PAGES);
}

/**
 * The open problems, newest first, a page at a time: the first page at once, the next ones when
 * asked (`showMore`), each added after those shown. A big fleet's problems are not all read at
 * every visit, and none is out of reach.
 */
function useOpenProblems(session: Session): { list: Problem[] | null; more: boolean; loading: boolean; error: string | null; showMore(): void } {
  const [state, setState] = useState<{ of: Session; list: Problem[] | null; cursor: string | null; loading: boolean; error: string | null }>({
    of: session,
    list: null,
    cursor: null,
    loading: true,
    error: null,
  });
  /** The first page read again after a failure that will pass (load.ts passing). */
  const retry = useRetryAfter503([session]);
  useEffect(() => {
    let live = true;
    setState({ of: session, list: null, cursor: null, loading: true, error: null });
    api.findings(session, { state: 'open', limit: PROBLEMS_PAGE }).then(
      (r) => live && setState({ of: session, list: r.findings, cursor: r.next_cursor, loading: false, error: null }),
      (err: unknown) => {
        if (!live) return;
        setState({ of: session, list: null, cursor: null, loading: false, error: passing(err) ? retrying(err) : failure(err) });
        if (passing(err)) retry.later();
      },
    );
    return () => {
      live = false;
    };
  }, [session, retry.tick]);
  const showMore = () => {
    const { cursor } = state;
    if (!cursor || state.loading) return;
    setState((s) => ({ ...s, loading: true, error: null }));
    // Added after those shown, unless the page moved on meanwhile (another project signed in).
    api.findings(session, { state: 'open', limit: PROBLEMS_PAGE, cursor }).then(
      (r) => setState((s) => (s.of !== session || s.cursor !== cursor ? s : { ...s, list: [...(s.list ?? []), ...r.findings], cursor: r.next_cursor, loading: false })),
      (err: unknown) => setState((s) => (s.of !== session ? s : { ...s, loading: false, error: failure(err) })),
    );
  };
  return { list: state.list, more: !!state.cursor, loading: state.loading, error: state.error, showMore };
}
