import { useEffect, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { count, shown, when } from '../format';
import { failure, useLoad } from '../load';
import { SUGGESTING_VERDICTS, VERDICTS, words, type PatternSession, type VerdictName } from '../review-types';
import { byReviewer, rememberReviewer, reviewer } from '../reviewer';
import { Link } from '../router';
import { usePageTitle } from '../title';
import type { Session } from '../session';
import { ReviewStateLine, StateBadge, VerdictBadge, VerdictLine } from '../components/ReviewBadges';
import { RuleLineage } from '../components/RuleLineage';
import { SuggestionsSummary } from '../components/Suggestions';

/** What each verdict means for the pattern's findings (docs/review.md). */
const VERDICT_HELP: Record<VerdictName, { label: string; means: string }> = {
  real: { label: 'Real mistake', means: 'A real agent mistake: its findings keep counting.' },
  acceptable: { label: 'Acceptable', means: 'Fine in this situation: its findings are suppressed, now and later.' },
  sop_wrong: { label: 'SOP wrong', means: 'The instruction is wrong or outdated: its findings keep counting.' },
  checker_wrong: { label: 'Checker wrong', means: 'sopops misjudged: its findings are suppressed.' },
};

/**
 * One pattern (a rule pattern or a failure mode): the rule it is about, its review state and
 * why, the verdict buttons with a note, the verdict history, its failure modes, the phrasings
 * its findings quote, and its sessions, each finding overridable. Suggestions appear only when
 * the API returns some.
 */
export function PatternPage({ session, base, id }: { session: Session; base: string; id: string }) {
  const p = useLoad(() => api.pattern(session, id), [session, id]);
  // What the last action said; `writing`: that a suggested edit is being written, said while the
  // page showed `over` (the pattern as read before the action), `keep` the part of the line that
  // stays once it is written (a verdict's confirmation).
  const [said, setSaid] = useState<{ ok: boolean; text: string; writing?: { over: unknown; keep: string } } | null>(null);
  // A suggestion being written: read the pattern again until it is done.
  const generating = p.data?.suggestions?.some((x) => x.status === 'generating') ?? false;
  const { reload } = p;
  useEffect(() => {
    if (!generating) return;
    const t = setTimeout(reload, 1000);
    return () => clearTimeout(t);
  }, [generating, p.data, reload]);
  // Once a read after "being written" shows none being written, say how it went instead: the
  // newest suggestion ready, or failed and why (the line would otherwise go on saying it is written).
  useEffect(() => {
    if (!said?.writing || !p.data || p.data === said.writing.over || generating) return;
    const newest = [...(p.data.suggestions ?? [])].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0))[0];
    const keep = said.writing.keep ? `${said.writing.keep} ` : '';
    if (newest?.status === 'failed') setSaid({ ok: false, text: `${keep}The suggested edit could not be written: ${newest.error ?? 'no reason given'}` });
    else if (newest?.status === 'proposed') setSaid({ ok: true, text: `${keep}The suggested edit is written: it is below, under Suggestions.` });
    else setSaid(keep ? { ok: true, text: keep.trim() } : null);
  }, [said, p.data, generating]);
  // Named as its heading names it, once read.
  usePageTitle(p.data ? `Pattern ${p.data.name}` : null);
  if (p.error && !p.data) {
    return (
      <main id="main">
        <h1>Pattern</h1>
        <p role="alert" className="error">{p.error}</p>
        <Link to={`${base}/review`}>Review queue</Link>
      </main>
    );
  }
  if (!p.data) return <main id="main" aria-busy="true"><p className="meta">Loading…</p></main>;
  const d = p.data;
  const done = (ok: boolean, text: string, writing?: { keep: string }) => {
    setSaid({ ok, text, ...(writing ? { writing: { over: d, keep: writing.keep } } : {}) });
    p.reload();
  };

  return (
    <main id="main" className="pattern-page">
      <p className="meta">
        <Link to={`${base}/review`}>Review queue</Link> ›{' '}
        {d.parent_id && (
          <>
            <Link to={`${base}/patterns/${encodeURIComponent(d.parent_id)}`}>rule pattern</Link> ›
          </>
        )}
      </p>
      <h1>
        <Ext>{d.name}</Ext>{' '}
        <span className="meta">
          <Ext>{d.rule.label}</Ext>
        </span>
      </h1>
      <p className="meta">
        <Ext>{d.procedure_name}</Ext>
        {d.theme && <> · theme <Ext>{d.theme.name}</Ext></>} · {d.kind === 'rule' ? 'rule pattern' : d.kind === 'sub' ? 'failure mode' : 'other findings'} ·{' '}
        {count(d.findings, 'finding')} and {d.suppressed} suppressed in {count(d.session_count, 'session')} since {when(d.window.from)} · first {when(d.first_seen)} · last{' '}
        {when(d.last_seen)} · clustered {d.clustered_at ? when(d.clustered_at) : 'never'}
        {d.retired_at && <> · retired {when(d.retired_at)}</>}
      </p>
      <blockquote className="rule-text">
        <Ext text>{d.rule.text}</Ext>
      </blockquote>
      {d.description && d.description !== d.rule.text && (
        <p>
          <Ext text>{d.description}</Ext>
        </p>
      )}

      <section aria-labelledby="review-h" className="panel">
        <h2 id="review-h">Review</h2>
        <ReviewStateLine r={d} />
        <p>
          Verdict: {d.verdict ? <VerdictLine v={d.verdict} /> : <span className="meta">none yet</span>} ·{' '}
          <span title="suppressed findings of this pattern, all time">{d.suppressed_count} suppressed (all time)</span>
        </p>
        <VerdictForm session={session} id={d.id} onDone={done} />
        {said && (
          <p role={said.ok ? 'status' : 'alert'} className={said.ok ? 'saved' : 'error'}>
            {said.text}
          </p>
        )}
        {d.verdict && <RegressionDownload session={session} id={d.id} />}
        <h3>Verdict history</h3>
        {d.verdict_history.length === 0 && !d.verdict && <p className="empty">No verdicts yet.</p>}
        <ol className="history">
          {[...(d.verdict && !d.verdict.inherited ? [d.verdict] : []), ...d.verdict_history].map((v, i) => (
            <li key={`${v.created_at}-${i}`}>
              <VerdictLine v={v} />
              {i === 0 && d.verdict && !d.verdict.inherited && <span className="meta"> (current)</span>}
            </li>
          ))}
        </ol>
      </section>

      <SuggestionsSummary
        items={d.suggestions ?? []}
        act={{ session, onDone: done, patternId: d.id, verdictSuggests: !!d.verdict && SUGGESTING_VERDICTS.includes(d.verdict.verdict) }}
      />

      {d.failure_modes.length > 0 && (
        <section aria-labelledby="modes-h">
          <h2 id="modes-h">Failure modes</h2>
          <table>
            <thead>
              <tr>
                <th scope="col">Failure mode</th>
                <th scope="col">State</th>
                <th scope="col">Verdict</th>
                <th scope="col" className="num">Findings</th>
                <th scope="col" className="num">Suppressed</th>
              </tr>
            </thead>
            <tbody>
              {d.failure_modes.map((m) => (
                <tr key={m.id}>
                  <td>
                    <Link to={`${base}/patterns/${encodeURIComponent(m.id)}`}>
                      <Ext>{m.name}</Ext>
                    </Link>
                    {m.kind === 'other' && <span className="meta"> (fits no failure mode)</span>}
                  </td>
                  <td>
                    <StateBadge state={m.review_state} />
                  </td>
                  <td>
                    <VerdictBadge verdict={m.verdict} />
                  </td>
                  <td className="num">{m.findings}</td>
                  <td className="num">{m.suppressed}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}

      <RuleLineage session={session} ruleId={d.rule.current_rule_id} procedure={d.procedure_id} />

      {d.wordings.length > 1 && (
        <section aria-labelledby="wordings-h">
          <h2 id="wordings-h">Wordings of the rule</h2>
          <ul>
            {d.wordings.map((w) => (
              <li key={w.rule_id}>
                <Ext text>{w.text}</Ext> <span className="meta">· {w.findings} findings, last {when(w.last_seen)}</span>
              </li>
            ))}
          </ul>
        </section>
      )}

      {d.example_phrasings.length > 0 && (
        <section aria-labelledby="phrasings-h">
          <h2 id="phrasings-h">Example phrasings</h2>
          <ul className="plain phrasings">
            {d.example_phrasings.map((q, i) => (
              <li key={i}>
                <mark className="quote">
                  <Ext text>{q}</Ext>
                </mark>
              </li>
            ))}
          </ul>
        </section>
      )}

      <section aria-labelledby="findings-h">
        <h2 id="findings-h">
          Example findings ({d.sessions.length < d.session_count ? `the newest ${d.sessions.length} of ${d.session_count}` : d.session_count})
        </h2>
        <div className="scroll-x">
          <table className="pattern-sessions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Started</th>
                <th scope="col">Status</th>
                <th scope="col">Reviewer's override</th>
              </tr>
            </thead>
            <tbody>
              {d.sessions.map((s) => (
                <SessionRow key={s.finding_id} s={s} base={base} session={session} onDone={done} />
              ))}
            </tbody>
          </table>
        </div>
      </section>
    </main>
  );
}

/** The four verdicts as buttons, with an optional note and the reviewer's name (kept for this tab). */
function VerdictForm({ session, id, onDone }: { session: Session; id: string; onDone(ok: boolean, text: string, writing?: { keep: string }): void }) {
  const [note, setNote] = useState('');
  const [who, setWho] = useState(reviewer);
  const [suggest, setSuggest] = useState(false);
  const [busy, setBusy] = useState(false);
  const give = async (verdict: VerdictName) => {
    setBusy(true);
    try {
      rememberReviewer(who);
      const v = await api.giveVerdict(session, id, { verdict, ...(note.trim() ? { note: note.trim() } : {}), ...byReviewer(), ...(suggest ? { suggest: true } : {}) });
      setNote('');
      const queued = v.suggestion ? ' A suggested edit is being written.' : v.suggestion_note ? ` No suggestion: ${v.suggestion_note}` : '';
      const saved = `Verdict ${words(v.verdict)} saved: the pattern is ${words(v.review_state)}, ${count(v.suppressed_count, 'finding')} suppressed.`;
      onDone(true, `${saved}${queued}`, v.suggestion ? { keep: saved } : undefined);
    } catch (err) {
      onDone(false, `The verdict was not saved: ${failure(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="verdict-form" onSubmit={(e) => e.preventDefault()} aria-label="Give a verdict">
      <label>
        Note (optional)
        <textarea value={note} onChange={(e) => setNote(e.target.value)} rows={2} placeholder="Why, for whoever reads this later" />
      </label>
      <label>
        Reviewer
        <input value={who} onChange={(e) => setWho(e.target.value)} placeholder="your name" />
      </label>
      <label className="check">
        <input type="checkbox" checked={suggest} onChange={(e) => setSuggest(e.target.checked)} /> Suggest an edit to the procedure (real, acceptable, SOP wrong)
      </label>
      <div className="verdict-buttons" role="group" aria-label="Verdicts">
        {VERDICTS.map((v) => (
          <button key={v} type="button" disabled={busy} onClick={() => give(v)} title={VERDICT_HELP[v].means} className={`verdict-${v}`}>
            {VERDICT_HELP[v].label}
          </button>
        ))}
      </div>
    </form>
  );
}

/** One finding of the pattern, with the reviewer's override: was the checker right about it? */
function SessionRow({ s, base, session, onDone }: { s: PatternSession; base: string; session: Session; onDone(ok: boolean, text: string): void }) {
  const [busy, setBusy] = useState(false);
  const override = async (correct: boolean) => {
    setBusy(true);
    try {
      const o = await api.override(session, s.finding_id, { correct, ...byReviewer() });
      onDone(true, `Finding on ${shown(s.external_id)} marked ${correct ? 'right' : 'wrong'}: ${o.suppressed ? 'suppressed' : 'counted'}; the session is now ${o.session_result ? words(o.session_result) : 'unmeasured'}.`);
    } catch (err) {
      onDone(false, `The override was not saved: ${failure(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <tr>
      <td>
        <Link to={`${base}/sessions/${encodeURIComponent(s.session_id)}`}>
          <Ext>{s.external_id}</Ext>
        </Link>
      </td>
      <td>{when(s.started_at)}</td>
      <td>
        <span className="states">
          <span className={`badge rule-${s.status}`}>{words(s.status)}</span>
          {s.suppressed && <span className="badge quiet">suppressed</span>}
        </span>
      </td>
      <td>
        {s.override && (
          <span className="meta">
            checker {s.override.correct ? 'right' : 'wrong'}
            {s.override.reviewer && (
              <>
                {' '}
                (<Ext>{s.override.reviewer}</Ext>)
              </>
            )}
            {s.override.note && (
              <>
                : <Ext text>{s.override.note}</Ext>
              </>
            )}{' '}
            ·{' '}
          </span>
        )}
        <span className="actions inline">
          <button type="button" disabled={busy} onClick={() => override(true)} aria-label={`Checker right about ${shown(s.external_id)}`}>
            Checker right
          </button>
          <button type="button" disabled={busy} onClick={() => override(false)} aria-label={`Checker wrong about ${shown(s.external_id)}`}>
            Checker wrong
          </button>
        </span>
      </td>
    </tr>
  );
}

/** The regression set (JSON Lines) as a file: the API needs the key, so it is fetched, not linked. */
function RegressionDownload({ session, id }: { session: Session; id: string }) {
  const [error, setError] = useState<string | null>(null);
  const download = async () => {
    try {
      const text = await api.regression(session, id);
      const url = URL.createObjectURL(new Blob([text], { type: 'application/x-ndjson' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `regression-${id}.jsonl`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
      setError(null);
    } catch (err) {
      setError(failure(err));
    }
  };
  return (
    <p>
      <button type="button" className="link" onClick={download}>
        Download the regression set (JSON Lines)
      </button>
      {error && <span className="error"> {error}</span>}
    </p>
  );
}
