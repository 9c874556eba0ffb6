import { useMemo, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import type { ListedCheck } from '../authoring-types';
import { CheckAuthoring } from '../components/CheckAuthoring';
import { percent, shown, when } from '../format';
import { failure, useLoad } from '../load';
import type { Session } from '../session';
import type { CheckStat, DisabledCheck, Finding } from '../types';

/** Where a check came from and what it does, read from its findings (pages of 500, this many at most). */
const FINDING_PAGES = 4;

/** The database rules a person may switch to halt: their own, and a coding agent's (theirs from then on); never the planner's. */
const HALT_BY = new Set(['app', 'cli', 'agent']);

/**
 * Checks: every check in effect in the project (its source, action, findings, precision,
 * whether it went quiet, should be retired or was disabled for a slow pattern), database checks
 * that are not in effect with why, and the editor to write one (CheckAuthoring).
 */
export function Checks({ session, base }: { session: Session; base: string }) {
  // The list shows as soon as the checks and their stats are read; the findings pages (up to 4
  // of 500, seconds with many findings) only fill in a removed check's source and action after.
  const lists = useLoad(async () => {
    const [listed, stats, disabled] = await Promise.all([api.checks(session), api.checkStats(session), api.disabledChecks(session)]);
    return { listed: listed.checks, stats: stats.checks, disabled: disabled.checks };
  }, [session]);
  const seen = useLoad(() => checksSeen(session), [session]);
  const data = {
    ...lists,
    data: useMemo(() => lists.data && merge(lists.data.listed, lists.data.stats, lists.data.disabled, seen.data ?? new Map()), [lists.data, seen.data]),
    reload: () => {
      lists.reload();
      seen.reload();
    },
  };
  const [editing, setEditing] = useState<{ yaml: string; n: number } | undefined>();
  const [acted, setActed] = useState<{ ok: boolean; text: string } | null>(null);

  const halt = async (id: string) => {
    setActed(null);
    try {
      const r = await api.haltCheck(session, id);
      setActed({ ok: true, text: `${shown(id)} now halts${r.steering === false ? ' (steering is off in this project: it only flags until steering is on)' : ''}.` });
      data.reload();
    } catch (err) {
      setActed({ ok: false, text: `${shown(id)} was not switched to halt: ${failure(err)}` });
    }
  };

  return (
    <main id="main">
      <h1>Checks</h1>
      <p className="meta">Every check in effect in this project, where it comes from and what it does, with its findings and precision.</p>
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {acted && (
        <p role={acted.ok ? 'status' : 'alert'} className={acted.ok ? 'ok' : 'error'}>
          {acted.text}
        </p>
      )}
      {data.loading && !data.data && <p aria-busy="true">Loading…</p>}
      {data.data && data.data.length === 0 && <p className="empty">No check is in effect here.</p>}
      {data.data && data.data.length > 0 && (
        <div className="scroll-x">
          <table className="checks-list">
            <thead>
              <tr>
                <th scope="col">Check</th>
                <th scope="col">Kind</th>
                <th scope="col">Source</th>
                <th scope="col">Action</th>
                <th scope="col" className="num">Findings</th>
                <th scope="col" className="num">Dismissed</th>
                <th scope="col" className="num">Precision</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span className="sr-only">Change</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {data.data.map(({ id, listed, stat, disabled, seen }) => {
                const action = listed?.action ?? seen?.action;
                const source = listed?.source ?? seen?.check_source ?? disabled?.source;
                const mine = listed?.source === 'database' && HALT_BY.has(listed.origin ?? '');
                return (
                  <tr key={`${id}-${listed?.source ?? ''}-${listed?.in_effect ?? ''}`}>
                    <td className="id">
                      <code title={listed?.title === undefined ? undefined : shown(listed.title)}>
                        <Ext>{id}</Ext>
                      </code>
                    </td>
                    <td>{listed?.kind ?? '—'}</td>
                    <td title={listed?.file ? shown(listed.file) : listed?.origin ? `written by ${shown(listed.origin)}` : undefined}>
                      {source ? <Ext>{source}</Ext> : '—'}
                      {!!listed?.overrides?.length && (
                        <div className="muted" data-overrides title={shown(listed.overrides.map((o) => o.file ?? o.source).join('\n'))}>
                          overrides <Ext>{listed.overrides.map((o) => (o.file ? `${o.source} (${o.file.split(/[\\/]/).pop()})` : o.source)).join(', ')}</Ext>
                        </div>
                      )}
                    </td>
                    <td>{action ? <span className={action === 'halt' ? 'badge halt' : 'badge'}>{action}</span> : '—'}</td>
                    <td className="num">{stat?.findings ?? 0}</td>
                    <td className="num">{stat?.dismissals ?? 0}</td>
                    <td className="num">{percent(stat?.precision)}</td>
                    <td>
                      <div className="states">
                        {listed && !listed.in_effect && <span className="badge warn">Not in effect: {listed.error ? <Ext text>{listed.error}</Ext> : 'unknown reason'}</span>}
                        {disabled && (
                          <span className="badge warn" title={shown(`${disabled.reason} (pattern ${disabled.pattern}, since ${when(disabled.since)})`)}>
                            Disabled: slow pattern ({disabled.ms} ms over {disabled.limit_ms} ms)
                          </span>
                        )}
                        {stat?.quiet && <span className="badge quiet">Quiet (dismissed 3 times)</span>}
                        {stat?.retire_suggested && <span className="badge warn">Retirement suggested</span>}
                        {listed?.in_effect !== false && !disabled && !stat?.quiet && !stat?.retire_suggested && 'Running'}
                      </div>
                    </td>
                    <td>
                      {listed?.yaml && (
                        <button type="button" className="link" onClick={() => setEditing({ yaml: listed.yaml!, n: Date.now() })} aria-label={`Edit ${shown(id)}`}>
                          Edit
                        </button>
                      )}
                      {mine && listed?.kind === 'rule' && action === 'flag' && (
                        <button type="button" className="link" onClick={() => void halt(id)} aria-label={`Switch ${shown(id)} to halt`}>
                          Switch to halt
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <CheckAuthoring session={session} base={base} editing={editing} onSaved={() => data.reload()} />
    </main>
  );
}

interface Row {
  id: string;
  listed?: ListedCheck;
  stat?: CheckStat;
  disabled?: DisabledCheck;
  seen?: Finding;
}

/** The checks listed (in effect first), then any check with findings that is no longer listed (removed since). */
function merge(listed: ListedCheck[], stats: CheckStat[], disabled: DisabledCheck[], seen: Map<string, Finding>): Row[] {
  const rows: Row[] = [...listed]
    .sort((a, b) => Number(b.in_effect) - Number(a.in_effect) || a.id.localeCompare(b.id))
    .map((l) => ({ id: l.id, listed: l, ...(l.in_effect ? { stat: stats.find((s) => s.check_id === l.id), disabled: disabled.find((d) => d.check_id === l.id), seen: seen.get(l.id) } : {}) }));
  const known = new Set(listed.map((l) => l.id));
  const gone = [...new Set([...stats.map((s) => s.check_id), ...disabled.map((d) => d.check_id)])].filter((id) => !known.has(id)).sort();
  for (const id of gone) rows.push({ id, stat: stats.find((s) => s.check_id === id), disabled: disabled.find((d) => d.check_id === id), seen: seen.get(id) });
  return rows;
}

/**
 * The newest finding of each check, quiet and grouped ones included: the source and action of
 * a check that has findings but is no longer listed.
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
