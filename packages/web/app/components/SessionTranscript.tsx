import { when } from '../format';
import { Ext } from './Ext';
import { Highlight } from './Highlight';
import type { Evidence, ProcedureCheck, SopTranscript } from '../sop-types';

type ToolCall = SopTranscript['tool_calls'][number];

/**
 * A session's whole transcript: its turns in order, each turn's tool calls after it, and every
 * rule's evidence quote marked where it was said (`#turn-N` is where a rule's evidence links).
 * Until the transcript has loaded (or when it cannot be, or retention deleted it), the quoted turns
 * alone are shown.
 */
export function SessionTranscript({ checks, transcript, error, transcriptRef }: { checks: ProcedureCheck[]; transcript: SopTranscript | null; error: string | null; transcriptRef: string | null }) {
  const quoted = evidenceByTurn(checks);
  return (
    <section aria-labelledby="transcript">
      <h2 id="transcript">Transcript</h2>
      {transcriptRef && (
        <p className="meta">
          Also kept at <code><Ext>{transcriptRef}</Ext></code>.
        </p>
      )}
      {error && <p role="alert" className="error">The transcript could not be loaded: {error}. The quoted turns follow.</p>}
      {!transcript && !error && <p className="meta">Loading the transcript…</p>}
      {transcript?.transcript_expired_at && (
        <p className="meta" role="note">
          The transcript was deleted by retention on {when(transcript.transcript_expired_at)}. The checks and the turns they quote are kept; the quoted turns follow.
        </p>
      )}
      {transcript && !transcript.transcript_expired_at ? <AllTurns transcript={transcript} quoted={quoted} /> : <QuotedTurns quoted={quoted} />}
    </section>
  );
}

function AllTurns({ transcript, quoted }: { transcript: SopTranscript; quoted: Map<number, Evidence[]> }) {
  if (!transcript.turns.length) return <p className="empty">The session has no turns.</p>;
  const callsOf = new Map<number, ToolCall[]>();
  for (const c of transcript.tool_calls) {
    const calls = callsOf.get(c.turn);
    if (calls) calls.push(c);
    else callsOf.set(c.turn, [c]);
  }
  return (
    <ol className="turns">
      {transcript.turns.map((t) => {
        const evidence = quoted.get(t.index) ?? [];
        const quotes = evidence.map((e) => e.quote);
        const calls = callsOf.get(t.index) ?? [];
        const lines = calls.map(callLine);
        // A quote found neither in the turn nor in its tool calls (cut short, or reworded) is still shown.
        const elsewhere = evidence.filter((e) => e.quote && !t.text.includes(e.quote) && !lines.some((l) => l.includes(e.quote!)));
        return (
          <li key={t.index} id={`turn-${t.index}`} className={`turn role-${t.role}${evidence.length ? ' evidence-turn' : ''}`}>
            <span className="turn-no">
              turn {t.index} · <Ext>{t.role}</Ext>
            </span>
            <div className="turn-text">
              <Highlight text={t.text} quotes={quotes} />
            </div>
            {calls.map((c, i) => (
              <div key={i} className="tool-call">
                <span className="meta">tool call</span> <code><Highlight text={lines[i]} quotes={quotes} /></code>
                {c.error ? <span className="badge warn">error: <Ext text>{c.error}</Ext></span> : c.output !== undefined && c.output !== null && <span className="meta"> → <Ext text>{JSON.stringify(c.output)}</Ext></span>}
              </div>
            ))}
            {elsewhere.map((e, i) => (
              <blockquote key={i} className="quote-block">
                <mark className="quote">
                  <Ext text>{e.quote}</Ext>
                </mark>{' '}
                <span className="meta">· {e.source === 'tool_calls' ? 'tool call' : 'transcript'}</span>
              </blockquote>
            ))}
          </li>
        );
      })}
    </ol>
  );
}

function QuotedTurns({ quoted }: { quoted: Map<number, Evidence[]> }) {
  if (!quoted.size) return <p className="empty">No evidence was quoted.</p>;
  return (
    <ol className="turns">
      {[...quoted.entries()].map(([turn, quotes]) => (
        <li key={turn} id={`turn-${turn}`} className="turn evidence-turn">
          <span className="turn-no">turn {turn}</span>
          {quotes.map((e, i) => (
            <blockquote key={i} className="quote-block">
              {e.quote ? <mark className="quote"><Ext text>{e.quote}</Ext></mark> : <span className="meta">(no words quoted)</span>} <span className="meta">· {e.source === 'tool_calls' ? 'tool call' : 'transcript'}</span>
            </blockquote>
          ))}
        </li>
      ))}
    </ol>
  );
}

/** A tool call as the checker quotes it in evidence (`tool {input}`), so its quote is found in it. */
function callLine(c: ToolCall): string {
  return c.input === null || c.input === undefined ? c.tool : `${c.tool} ${JSON.stringify(c.input)}`;
}

/** Each quoted turn once, in order, with what was quoted from it (the same quote once). */
function evidenceByTurn(checks: ProcedureCheck[]): Map<number, Evidence[]> {
  const by = new Map<number, Evidence[]>();
  for (const c of checks)
    for (const r of c.rules)
      for (const e of r.evidence) {
        const list = by.get(e.turn) ?? [];
        if (!list.some((x) => x.quote === e.quote && x.source === e.source)) list.push(e);
        by.set(e.turn, list);
      }
  return new Map([...by.entries()].sort((a, b) => a[0] - b[0]));
}
