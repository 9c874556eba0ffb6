import type { KeyboardEvent } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { percent, shown } from '../format';
import { useLoad } from '../load';
import type { Insights as InsightsView } from '../review-types';
import { href, Link, navigate, type Where } from '../router';
import type { Session } from '../session';
import { LineChart, Sparkline, StackedBar } from '../components/Charts';
import { perSession, ReleaseCompare } from '../components/ReleaseCompare';
import { VirtualList } from '../components/VirtualList';

const WINDOWS = [7, 30, 90, 365] as const;
/** Weeks drawn in the follow-rate chart (the last of the window). */
const TREND_WEEKS = 12;
const LADDER_ROW = 46;

/**
 * Insights: how well procedures are followed in a window (tiles, a row per procedure, the follow
 * rate per procedure week by week) and which rules are broken most (the ladder, with each rule's
 * weekly trend). Suppressed findings are in no count or rate: they are shown apart. The window,
 * the procedure and the selected ladder row are in the URL.
 */
export function Insights({ session, base, where }: { session: Session; base: string; where: Where }) {
  const days = where.query.get('days') ?? '90';
  const procedure = where.query.get('procedure') ?? '';
  const path = `${base}/insights`;
  const data = useLoad(() => api.insights(session, { days, procedure }), [session, days, procedure]);
  // The procedures to pick from: the window's, whatever procedure is picked now.
  const all = useLoad(() => (procedure ? api.insights(session, { days }) : Promise.resolve(null)), [session, days, procedure]);
  const choices = (procedure ? all.data : data.data)?.scoreboard ?? [];
  // The link's other parameters (the releases compared, from and to) stay as they are.
  const go = (q: { days?: string; procedure?: string; row?: string }) => navigate(linkTo(path, where, { days, procedure, ...q }), { replace: q.row !== undefined });

  return (
    <main id="main" className="insights-page">
      <h1>Insights</h1>
      <form className="filters" onSubmit={(e) => e.preventDefault()} aria-label="Window and procedure">
        <label>
          Window
          <select value={days} onChange={(e) => go({ days: e.target.value, row: undefined })}>
            {WINDOWS.map((w) => (
              <option key={w} value={String(w)}>
                last {w} days
              </option>
            ))}
            {!WINDOWS.map(String).includes(days) && <option value={days}>last {days} days</option>}
          </select>
        </label>
        <label>
          Procedure
          <select value={procedure} onChange={(e) => go({ procedure: e.target.value, row: undefined })}>
            <option value="">all procedures</option>
            {choices.map((p) => (
              <option key={p.procedure_id} value={p.procedure_id}>
                {shown(p.procedure_name)}
              </option>
            ))}
            {procedure && !choices.some((c) => c.procedure_id === procedure) && <option value={procedure}>{shown(procedure)}</option>}
          </select>
        </label>
      </form>
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {/* While a window or procedure is read, what is shown is the one before it: said, and dimmed. */}
      <div className="insights-body" aria-busy={data.loading}>
        {data.loading && <p className="meta">Loading…</p>}
        {data.data && (
          <div style={data.loading ? { opacity: 0.5 } : undefined}>
            <Body d={data.data} base={base} where={where} go={go} />
          </div>
        )}
      </div>
      <ReleaseCompare session={session} base={base} where={where} />
    </main>
  );
}

function Body(props: {
  d: InsightsView;
  base: string;
  where: Where;
  go(q: { row?: string }): void;
}) {
  const { d, base } = props;
  const trend = weeklyFollowRates(d);
  const t = d.tiles;
  const rowId = props.where.query.get('row');
  const found = d.ladder.findIndex((l) => l.pattern_id === rowId);
  const selected = found >= 0 ? found : d.ladder.length ? 0 : -1;
  const patternLink = (id: string) => `${base}/patterns/${encodeURIComponent(id)}`;
  const open = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && selected >= 0) navigate(patternLink(d.ladder[selected].pattern_id));
  };
  return (
    <>
      <p className="meta">
        Sessions from {new Date(d.window.from).toLocaleDateString()} to {new Date(d.window.to).toLocaleDateString()}. Suppressed findings
        (judged acceptable or the checker's mistake) are in no count or rate: they are shown apart.
      </p>
      <section className="tiles" aria-label="Totals">
        <Tile label="Sessions checked" value={String(t.sessions)} />
        <Tile label="Follow rate" value={percent(t.follow_rate)} hint="followed / (followed + partial + deviated)" />
        <Tile label="Findings" value={String(t.findings)} />
        <Tile label="Suppressed (apart)" value={String(t.suppressed)} quiet />
      </section>
      <StackedBar
        label={`Sessions by result: ${t.results.followed} followed, ${t.results.partial} partial, ${t.results.deviated} deviated, ${t.results.not_measurable} not measurable`}
        parts={[
          { name: 'followed', value: t.results.followed, className: 'fill-followed' },
          { name: 'partial', value: t.results.partial, className: 'fill-partial' },
          { name: 'deviated', value: t.results.deviated, className: 'fill-deviated' },
          { name: 'not measurable', value: t.results.not_measurable, className: 'fill-not_measurable' },
        ]}
      />

      <section aria-labelledby="trend-h">
        <h2 id="trend-h">Follow rate per procedure, by week</h2>
        {trend.series.length === 0 && <p className="empty">No sessions checked in these weeks.</p>}
        {trend.series.length > 0 && (
          <LineChart title="Follow rate per procedure, by week" xLabels={trend.weeks} series={trend.series} max={1} format={(v) => percent(v)} />
        )}
      </section>

      <section aria-labelledby="score-h">
        <h2 id="score-h">Procedures</h2>
        {d.scoreboard.length === 0 && <p className="empty">No sessions checked in the window.</p>}
        {d.scoreboard.length > 0 && (
          <div className="scroll-x">
            <table className="scoreboard">
              <thead>
                <tr>
                  <th scope="col">Procedure</th>
                  <th scope="col" className="num">Sessions</th>
                  <th scope="col" className="num">Followed</th>
                  <th scope="col" className="num">Partial</th>
                  <th scope="col" className="num">Deviated</th>
                  <th scope="col" className="num">Not measurable</th>
                  <th scope="col" className="num">Follow rate</th>
                  <th scope="col" className="num">Findings</th>
                  <th scope="col" className="num">Suppressed</th>
                </tr>
              </thead>
              <tbody>
                {d.scoreboard.map((p) => (
                  <tr key={p.procedure_id}>
                    <th scope="row">
                      <Link to={linkTo(`${base}/insights`, props.where, { procedure: p.procedure_id, row: undefined })}>
                        <Ext>{p.procedure_name}</Ext>
                      </Link>
                    </th>
                    <td className="num">{p.sessions}</td>
                    <td className="num">{p.results.followed}</td>
                    <td className="num">{p.results.partial}</td>
                    <td className="num">{p.results.deviated}</td>
                    <td className="num">{p.results.not_measurable}</td>
                    <td className="num">{percent(p.follow_rate)}</td>
                    <td className="num">{p.findings}</td>
                    <td className="num meta">{p.suppressed}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>

      <section aria-labelledby="ladder-h" onKeyDown={open}>
        <h2 id="ladder-h">Top patterns{d.ladder.length > 0 ? ` (${d.ladder.length}; ↑ ↓ to move, Enter to open)` : ''}</h2>
        {d.ladder.length === 0 && <p className="empty">No findings in the window.</p>}
        {d.ladder.length > 0 && (
          <>
            <div className="ladder-head meta" aria-hidden="true">
              <span>Rule</span>
              <span>Findings</span>
              <span className="num">Findings per session</span>
              <span>Weekly</span>
              <span className="num">Suppressed</span>
            </div>
            <VirtualList
              id="ladder"
              label="Top patterns"
              count={d.ladder.length}
              rowHeight={LADDER_ROW}
              selected={selected}
              onSelect={(i) => props.go({ row: d.ladder[i].pattern_id })}
              rowLabel={(i) => {
                const l = d.ladder[i];
                return `${l.name}, ${l.label}, ${l.findings} findings, ${perSession(l.rate)} findings per session, ${l.suppressed} suppressed`;
              }}
              renderRow={(i) => {
                const l = d.ladder[i];
                const top = Math.max(1, d.ladder[0].findings);
                return (
                  <div className="ladder-row">
                    <span className="ellipsis">
                      <Link to={patternLink(l.pattern_id)} tabIndex={-1}>
                        <Ext>{l.name}</Ext>
                      </Link>{' '}
                      <span className="meta">
                        <Ext>{l.label}</Ext>
                      </span>
                    </span>
                    <span className="hbar" title={`${l.findings} findings`}>
                      <span style={{ width: `${(l.findings / top) * 100}%` }} />
                      <b>{l.findings}</b>
                    </span>
                    <span className="num" title="findings per session checked on its procedure">
                      {perSession(l.rate)}
                    </span>
                    <Sparkline values={l.trend} label={`${shown(l.name)}: findings per week, ${l.trend.join(', ')}`} />
                    <span className="num meta">{l.suppressed}</span>
                  </div>
                );
              }}
            />
          </>
        )}
      </section>
    </>
  );
}

/** This page's link with `q` changed (undefined: left out) and every other parameter kept. */
function linkTo(path: string, where: Where, q: Record<string, string | undefined>): string {
  const query: Record<string, string | undefined> = Object.fromEntries(where.query);
  return href(path, { ...query, ...q });
}

function Tile({ label, value, hint, quiet }: { label: string; value: string; hint?: string; quiet?: boolean }) {
  return (
    <div className={quiet ? 'tile quiet' : 'tile'} title={hint}>
      <div className="tile-value">{value}</div>
      <div className="tile-label">{label}</div>
    </div>
  );
}

interface WeeklyRates {
  weeks: string[];
  series: { name: string; values: (number | null)[] }[];
}

/**
 * The follow rate of each procedure in the window's last weeks, from the scoreboard's weekly
 * rates (one answer of the API). A procedure with no judged session in those weeks has no rate
 * to draw: it gets no line.
 */
function weeklyFollowRates(d: InsightsView): WeeklyRates {
  const n = Math.min(TREND_WEEKS, d.weeks.length);
  const weeks = d.weeks.slice(d.weeks.length - n);
  const series = d.scoreboard
    .map((p) => ({ name: p.procedure_name, values: p.weekly_follow_rate.slice(p.weekly_follow_rate.length - n) }))
    .filter((line) => line.values.some((v) => v !== null));
  return { weeks, series };
}
