import { api } from '../api';
import { Ext } from './Ext';
import { count, percent, shown } from '../format';
import { useLoad } from '../load';
import type { ReleaseCompare as CompareView } from '../review-types';
import { href, Link, navigate, type Where } from '../router';
import type { Session } from '../session';
import type { ReleaseSummary } from '../sop-types';

/**
 * Two releases side by side (GET insights/compare): per procedure, the sessions checked on each,
 * their follow rate and findings per measurable session; per rule pattern, its findings per
 * measurable session on each. A rule reworded
 * between them is one row (its lineage). The releases picked are in the URL (`from`, `to`);
 * by default the live one against the one before it.
 */
export function ReleaseCompare({ session, base, where }: { session: Session; base: string; where: Where }) {
  const from = where.query.get('from') ?? '';
  const to = where.query.get('to') ?? '';
  const procedure = where.query.get('procedure') ?? '';
  const releases = useLoad(() => api.releaseSummaries(session), [session]);
  const items = releases.data?.items ?? [];
  const cmp = useLoad(
    () => (items.length < 2 ? Promise.resolve(null) : api.compareReleases(session, { from: from || undefined, to: to || undefined, procedure: procedure || undefined })),
    [session, from, to, procedure, items.length],
  );
  const d = cmp.data;
  const shownFrom = from || (d ? String(d.from.number) : '');
  const shownTo = to || (d ? String(d.to.number) : '');
  // Both sides go in the URL once one is picked: the other's default depends on it.
  const go = (q: { from: string; to: string }) => {
    const query: Record<string, string | undefined> = {};
    for (const [k, v] of where.query) query[k] = v;
    navigate(href(`${base}/insights`, { ...query, ...q }), { replace: true });
  };
  return (
    <section aria-labelledby="compare-h" className="release-compare">
      <h2 id="compare-h">Compare releases</h2>
      {releases.error && <p role="alert" className="error">{releases.error}</p>}
      {releases.data && items.length === 0 && <p className="empty">No release yet: publish head (Procedures) and then another release to compare the sessions checked on each.</p>}
      {releases.data && items.length === 1 && <p className="empty">One release so far: publish another to compare the sessions checked on each.</p>}
      {items.length >= 2 && (
        <form className="filters" onSubmit={(e) => e.preventDefault()} aria-label="Releases compared">
          <ReleasePick label="From" items={items} value={shownFrom} other={shownTo} onPick={(v) => go({ from: v, to: shownTo })} />
          <ReleasePick label="To" items={items} value={shownTo} other={shownFrom} onPick={(v) => go({ from: shownFrom, to: v })} />
        </form>
      )}
      {cmp.error && <p role="alert" className="error">{cmp.error}</p>}
      {d && <CompareTable d={d} base={base} />}
    </section>
  );
}

/** One side's release; the other side's is not offered (a release is never compared with itself). */
function ReleasePick(p: { label: string; items: readonly ReleaseSummary[]; value: string; other: string; onPick(v: string): void }) {
  return (
    <label>
      {p.label}
      <select value={p.value} onChange={(e) => p.onPick(e.target.value)}>
        {p.items.map((r) => (
          <option key={r.id} value={String(r.number)} disabled={String(r.number) === p.other}>
            release {r.number}
            {r.live ? ' (live)' : ''}
          </option>
        ))}
      </select>
    </label>
  );
}

function CompareTable({ d, base }: { d: CompareView; base: string }) {
  if (d.procedures.length === 0) return <p className="empty">No procedure in either release.</p>;
  const f = `release ${d.from.number}`;
  const t = `release ${d.to.number}`;
  return (
    <>
      <div className="scroll-x">
        <table className="compare" aria-label={`Release ${d.from.number} against release ${d.to.number}`}>
          <thead>
            <tr>
              <th scope="col">Procedure, rule</th>
              <th scope="col" className="num">Sessions ({f} → {t})</th>
              <th scope="col" className="num">Follow rate</th>
              <th scope="col" className="num" title="not_measurable sessions and their findings left out, as in the follow rate">
                Findings per measurable session
              </th>
              <th scope="col" className="num" title="not suppressed, in every session checked on the release, not_measurable ones included">
                Findings (all sessions)
              </th>
              <th scope="col" className="num">Suppressed</th>
            </tr>
          </thead>
          {d.procedures.map((p) => (
            <tbody key={p.procedure_id} aria-label={shown(p.procedure_name)}>
              <tr className="procedure-row">
                <th scope="row">
                  <Ext>{p.procedure_name}</Ext>
                  {!p.in_from && <span className="meta"> (new in {t})</span>}
                  {!p.in_to && <span className="meta"> (not in {t})</span>}
                </th>
                <td className="num">
                  {p.from.sessions} → {p.to.sessions}
                </td>
                <td className="num">
                  <Change a={p.from.follow_rate} b={p.to.follow_rate} better="up" />
                </td>
                <td className="num">
                  {/* The API's rate: findings per measurable session, as the rules' rates below count them. */}
                  <Change a={p.from.rate} b={p.to.rate} better="down" unit="count" />
                </td>
                <td className="num meta">
                  <Findings a={p.from.findings} b={p.to.findings} />
                </td>
                <td className="num meta">
                  {p.from.suppressed} → {p.to.suppressed}
                </td>
              </tr>
              {p.rules.map((r) => (
                <tr key={r.pattern_id} className="rule-row">
                  <th scope="row">
                    <Link to={`${base}/patterns/${encodeURIComponent(r.pattern_id)}`}>
                      <Ext>{r.name}</Ext>
                    </Link>{' '}
                    <span className="meta">
                      <Ext>{r.label}</Ext>
                    </span>
                  </th>
                  <td />
                  <td />
                  <td className="num">
                    <Change a={r.from.rate} b={r.to.rate} better="down" unit="count" />
                  </td>
                  <td className="num meta">
                    <Findings a={r.from.findings} b={r.to.findings} />
                  </td>
                  <td className="num meta">
                    {r.from.suppressed} → {r.to.suppressed}
                  </td>
                </tr>
              ))}
            </tbody>
          ))}
        </table>
      </div>
      <p className="meta">
        Findings per measurable session leave out the <code>not_measurable</code> sessions and their findings, as the follow rate does; Findings (all sessions)
        counts every finding not suppressed, theirs included.
      </p>
    </>
  );
}

/** A count of findings on each release, each said with its word: "1 finding → 0 findings". */
function Findings({ a, b }: { a: number; b: number }) {
  return (
    <>
      {count(a, 'finding')} → {count(b, 'finding')}
    </>
  );
}

/**
 * Two values, and which way they moved (by its sign and, for colour, whether that is better): a
 * rate as a percentage that moved by points, or a count per session (findings per session: 2.5,
 * never "250%") that moved by as much, both to two decimals.
 */
function Change({ a, b, better, unit = 'rate' }: { a: number | null; b: number | null; better: 'up' | 'down'; unit?: 'rate' | 'count' }) {
  const show = unit === 'rate' ? percent : perSession;
  // Points of a rate; hundredths of a count.
  const delta = a !== null && b !== null ? Math.round((b - a) * 100) : null;
  const good = delta === null || delta === 0 ? '' : (delta > 0) === (better === 'up') ? 'better' : 'worse';
  const moved = delta === null ? '' : unit === 'rate' ? `${Math.abs(delta)} pts` : perSession(Math.abs(delta) / 100);
  return (
    <span className={`change ${good}`}>
      {show(a)} → {show(b)}
      {delta !== null && delta !== 0 && <span className="delta"> ({delta > 0 ? '+' : '−'}{moved})</span>}
    </span>
  );
}

/** A count per session as a plain number: 2.5, 0.33, 3 (Insights' top patterns show theirs the same way). */
export function perSession(v: number | null): string {
  return v === null ? '—' : String(Math.round(v * 100) / 100);
}
