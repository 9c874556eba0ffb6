import { useEffect, useRef, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { when } from '../format';
import { failure, useLoad } from '../load';
import { href, Link } from '../router';
import type { Session } from '../session';
import { inReadingOrder, type ProcedureCheck } from '../sop-types';
import { usePageTitle } from '../title';
import { SessionTranscript } from '../components/SessionTranscript';
import { ResultBadge, RuleStatusBadge } from '../components/SopBadges';

const KIND_LABEL = { step: 'Step', never: 'Never', warning: 'Warning sign' } as const;

/**
 * One session: its result, a panel per procedure the router considered (its rules in reading
 * order with status, reason and evidence, each linking to its turn), and the whole transcript
 * (GET .../sessions/{id}/transcript) with the evidence marked in it. Why its check failed, or
 * (a warning) why some of its rules were not checked though it was; and *Check again*
 * (POST .../sessions/{id}/recheck).
 */
export function SopSessionPage({ session, base, id }: { session: Session; base: string; id: string }) {
  const s = useLoad(() => api.sopSession(session, id), [session, id]);
  const t = useLoad(() => api.sopTranscript(session, id), [session, id]);
  useFragmentOnceLoaded(!!s.data && !t.loading, id);
  const recheck = useRecheck(session, id, s.reload);
  useWhileQueued(s.data?.id === id && s.data.status === 'queued', s.data, s.reload);
  // Named as its heading names it, once this session (not the one shown before it) is read.
  usePageTitle(s.data?.id === id ? `Session ${s.data.external_id ?? s.data.id}` : null);
  if (s.error) {
    return (
      <main id="main">
        <h1>Session</h1>
        <p role="alert" className="error">{s.error}</p>
        <Link to={`${base}/sessions`}>All sessions</Link>
      </main>
    );
  }
  if (!s.data) return <main id="main" aria-busy="true"><p className="meta">Loading…</p></main>;
  const d = s.data;
  return (
    <main id="main">
      <p className="meta">
        <Link to={`${base}/sessions`}>Sessions</Link> ›
      </p>
      <h1>
        Session <Ext>{d.external_id ?? d.id}</Ext> <ResultBadge result={d.result} />
      </h1>
      <p className="meta">
        agent {d.agent ? <Ext>{d.agent}</Ext> : '—'} · received {when(d.received_at)} · <span className={`badge status-${d.status}`}>{d.status}</span>
        {d.checked_at && <> · checked {when(d.checked_at)}</>}
        {d.checked_result && d.checked_result !== d.result && <> · checker said <ResultBadge result={d.checked_result} /> before reviewers' verdicts</>}
      </p>
      {d.status === 'failed' && d.error && (
        <p role="alert" className="error">
          Check failed: <Ext text>{d.error}</Ext>
        </p>
      )}
      {/* Checked, but the model failed on some questions on its last try: their rules are not_checked. */}
      {d.status === 'checked' && d.error && (
        <p role="note" className="stale-note">
          <strong>Not every rule was checked:</strong> <Ext text>{d.error}</Ext>
        </p>
      )}
      {d.status === 'queued' && (
        <p className="meta" role="status">
          Waiting to be checked: this page reads the session again until the check is done.
        </p>
      )}
      {/* Nothing to check again once retention emptied the transcript (the API answers 409): send the session again instead. */}
      {d.status !== 'queued' && !t.loading && !t.data?.transcript_expired_at && (
        <p>
          <button type="button" onClick={() => void recheck.run()} disabled={recheck.busy}>
            Check again
          </button>{' '}
          <span className="meta">its results are replaced by a new check of the session as stored</span>
        </p>
      )}
      {recheck.said && (
        <p role={recheck.said.ok ? 'status' : 'alert'} className={recheck.said.ok ? 'ok' : 'error'}>
          {recheck.said.text}
        </p>
      )}
      {d.checks.length === 0 && d.status === 'checked' && <p className="empty">No procedure was considered for this session.</p>}
      {d.checks.map((c) => (
        <CheckPanel key={c.procedure_id} check={c} base={base} />
      ))}
      <SessionTranscript checks={d.checks} transcript={t.data} error={t.error} transcriptRef={d.transcript_ref} />
    </main>
  );
}

function CheckPanel({ check: c, base }: { check: ProcedureCheck; base: string }) {
  const rules = inReadingOrder(c.rules);
  return (
    <section className="sop-check" aria-labelledby={`proc-${c.procedure_id}`}>
      <header>
        <h2 id={`proc-${c.procedure_id}`}>
          <Ext>{c.procedure_name}</Ext> <span className="meta">v{c.procedure_version}</span> <ResultBadge result={c.result} />
        </h2>
        <p className="meta">
          {c.applicable === false ? 'Not applicable' : c.applicable ? 'Applicable' : 'Applicability not decided'}: <Ext text>{c.route_reason}</Ext>
          {c.excluded_reason && <> · excluded: <Ext text>{c.excluded_reason}</Ext></>}
          {c.release_id && (
            <>
              {' '}· release{' '}
              <Link to={href(`${base}/procedures`)}>
                <Ext>{c.release_id}</Ext>
              </Link>
            </>
          )}
        </p>
        {c.checked_result && c.checked_result !== c.result && (
          <p className="meta">
            Checker's result <ResultBadge result={c.checked_result} />, now <ResultBadge result={c.result} /> after reviewers' verdicts.
          </p>
        )}
        <p>
          Goal: {c.goal_reached === null ? <span className="meta">not decided</span> : c.goal_reached ? <span className="badge ok">reached</span> : <span className="badge warn">not reached</span>}
          {c.goal_reason && <span className="meta"> — <Ext text>{c.goal_reason}</Ext></span>}
        </p>
        <p className="meta">
          Steps done {c.steps_done} of {c.steps_applicable} applicable · never rules violated {c.nevers_violated} · model {c.model ? <Ext>{c.model}</Ext> : '—'} · prompt {c.prompt_version ? <Ext>{c.prompt_version}</Ext> : '—'}
        </p>
      </header>
      {rules.length > 0 && (
        <table className="rules">
          <thead>
            <tr>
              <th scope="col">Rule</th>
              <th scope="col">Status</th>
              <th scope="col">Reason and evidence</th>
            </tr>
          </thead>
          <tbody>
            {rules.map((r) => (
              <tr key={r.rule_id} className={r.finding ? 'is-finding' : undefined}>
                <td>
                  <span className="meta">
                    {KIND_LABEL[r.kind]} {r.index}
                  </span>
                  <div>
                    <Ext text>{r.text}</Ext>
                  </div>
                </td>
                <td>
                  <RuleStatusBadge rule={r} />
                </td>
                <td>
                  <div>
                    <Ext text>{r.reason}</Ext>
                  </div>
                  {r.finding && r.pattern_id && (
                    <div className="meta">
                      <Link to={`${base}/patterns/${encodeURIComponent(r.pattern_id)}`}>Its pattern</Link>
                      {r.override && <> · a reviewer said the checker was {r.override.correct ? 'right' : 'wrong'}</>}
                    </div>
                  )}
                  {r.evidence.map((e, i) => (
                    <div key={i} className="quote-block">
                      <a href={`#turn-${e.turn}`}>turn {e.turn}</a>
                      {e.quote && <>: “<Ext text>{e.quote}</Ext>”</>}
                    </div>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The first wait before a queued session is read again, and the longest (the wait grows by a quarter each time). */
const QUEUED_FIRST_MS = 1000;
const QUEUED_MAX_MS = 2000;

/**
 * While the session is queued (sent, or checked again), it is read again after a second, then
 * a little later each time up to every 2 s, until its status is no longer queued; not after the
 * page is left.
 */
function useWhileQueued(queued: boolean, data: unknown, reload: () => void): void {
  const reads = useRef(0);
  useEffect(() => {
    if (!queued) {
      reads.current = 0;
      return;
    }
    const wait = Math.min(QUEUED_FIRST_MS * 1.25 ** reads.current, QUEUED_MAX_MS);
    const t = setTimeout(() => {
      reads.current++;
      reload();
    }, wait);
    return () => clearTimeout(t);
    // `data`: each answer that is still queued waits again.
  }, [queued, data, reload]);
}

/**
 * *Check again*: POST .../sessions/{id}/recheck, then the session read again (queued until its
 * check is done, read again while it is: useWhileQueued). One at a time: the button is
 * disabled until the answer comes.
 */
function useRecheck(session: Session, id: string, reload: () => void): { run(): Promise<void>; busy: boolean; said: { ok: boolean; text: string } | null } {
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState<{ ok: boolean; text: string } | null>(null);
  const inFlight = useRef(false);
  useEffect(() => setSaid(null), [session, id]);
  const run = async () => {
    if (inFlight.current) return;
    inFlight.current = true;
    setBusy(true);
    setSaid(null);
    try {
      await api.recheckSession(session, id);
      setSaid({ ok: true, text: 'Queued to be checked again.' });
      reload();
    } catch (err) {
      setSaid({ ok: false, text: `Not queued: ${failure(err)}` });
    } finally {
      inFlight.current = false;
      setBusy(false);
    }
  };
  return { run, busy, said };
}

/**
 * A link to a turn (`#turn-3`, an evidence link opened, shared or reloaded): the turns are drawn
 * once the session and its transcript are read, after the browser looked for the fragment, so
 * the page goes to it then. Going to the fragment again is a fragment navigation (no reload):
 * the browser scrolls to the turn and outlines it (`:target`); the turn also takes the focus,
 * so the keyboard and a screen reader continue from it. Once per page and fragment.
 */
function useFragmentOnceLoaded(loaded: boolean, page: string): void {
  const done = useRef<string | null>(null);
  useEffect(() => {
    if (!loaded || !location.hash) return;
    const key = `${page}${location.hash}`;
    if (done.current === key) return;
    let target: HTMLElement | null = null;
    try {
      target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    } catch {
      return; // not a fragment this page makes
    }
    if (!target) return;
    done.current = key;
    if (!target.matches(':target')) location.replace(location.href);
    else target.scrollIntoView();
    if (!target.hasAttribute('tabindex')) target.tabIndex = -1;
    target.focus({ preventScroll: true });
  }, [loaded, page]);
}
