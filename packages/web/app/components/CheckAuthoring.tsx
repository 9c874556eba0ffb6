import { useEffect, useRef, useState } from 'react';
import { api, ApiFailure } from '../api';
import type { CheckPreview, CheckProblem } from '../authoring-types';
import { failure } from '../load';
import { shown } from '../format';
import { Ext } from './Ext';
import { Link } from '../router';
import type { Session } from '../session';
import { CodeEditor, type LineProblem } from './CodeEditor';

/** How long typing pauses before the check is validated again. */
const VALIDATE_AFTER_MS = 600;
const DEFAULT_RUNS = 20;
const MAX_RUNS = 100;

/** The run count as typed, as the preview takes it: 1 to 100, and 20 when the field is empty or no number. */
function runCount(typed: string): number {
  const n = Math.round(Number(typed));
  return typed.trim() === '' || !Number.isFinite(n) ? DEFAULT_RUNS : Math.min(MAX_RUNS, Math.max(1, n));
}

const EXAMPLE = `id: refund-needs-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;

type Validation = { state: 'idle' | 'checking' } | { state: 'ok'; warnings: string[] } | { state: 'bad'; problems: LineProblem[] } | { state: 'failed'; error: string };

/** A problem as `checks validate` prints it: the check, the field, the reason (the line is in the gutter). */
function asLineProblem(p: CheckProblem): LineProblem {
  return { line: p.line, text: [p.check_id && `check ${p.check_id}`, p.field, p.reason].filter(Boolean).join(': ') };
}

function problemsOf(err: unknown): LineProblem[] | null {
  if (!(err instanceof ApiFailure) || err.code !== 'invalid_check') return null;
  return err.problems.length ? err.problems.map(asLineProblem) : [{ text: err.message }];
}

/** Live validation: besides invalid checks, save's other refusals (your halt rule in a file: 409) are problems too. */
function refusalOf(err: unknown): LineProblem[] | null {
  if (err instanceof ApiFailure && (err.status === 403 || err.status === 409)) return [{ text: err.message }];
  return problemsOf(err);
}

/**
 * Writing a check: a concern drafted by the model (shown, not saved), the YAML edited with
 * live validation by the API (the same problems as `checks validate`, at their line), a
 * preview on the project's recent runs, and save.
 *
 * The live validation asks checks/validate: exactly what save would refuse, with no run read
 * and no model called, so typing costs nothing.
 */
export function CheckAuthoring({ session, base, editing, onSaved }: { session: Session; base: string; editing?: { yaml: string; n: number }; onSaved(id: string): void }) {
  const [yaml, setYaml] = useState(EXAMPLE);
  const [concern, setConcern] = useState('');
  const [drafting, setDrafting] = useState(false);
  const [draftNote, setDraftNote] = useState<{ text: string; warnings: string[] } | null>(null);
  const [validation, setValidation] = useState<Validation>({ state: 'idle' });
  // As typed: clamped when the field is left or the preview asked for, not at every key.
  const [runs, setRuns] = useState(String(DEFAULT_RUNS));
  /** The preview, and the YAML it was for: once the editor's text differs, it is stale. */
  const [preview, setPreview] = useState<{ busy: boolean; result?: CheckPreview; error?: string; yaml?: string }>({ busy: false });
  const editor = useRef<HTMLDivElement>(null);
  const [saved, setSaved] = useState<{ busy: boolean; text?: string; error?: string }>({ busy: false });
  const seq = useRef(0);

  // A check picked in the list to edit replaces the editor's text, brought into view with the focus.
  useEffect(() => {
    if (!editing) return;
    setYaml(editing.yaml);
    const box = editor.current;
    box?.scrollIntoView({ block: 'start' });
    box?.querySelector('textarea')?.focus({ preventScroll: true });
  }, [editing]);

  useEffect(() => {
    const n = ++seq.current;
    if (!yaml.trim()) {
      setValidation({ state: 'idle' });
      return;
    }
    setValidation({ state: 'checking' });
    const t = setTimeout(() => {
      api.validateCheck(session, yaml).then(
        (r) => n === seq.current && setValidation({ state: 'ok', warnings: r.warnings }),
        (err: unknown) => {
          if (n !== seq.current) return;
          const problems = refusalOf(err);
          setValidation(problems ? { state: 'bad', problems } : { state: 'failed', error: failure(err) });
        },
      );
    }, VALIDATE_AFTER_MS);
    return () => clearTimeout(t);
  }, [session, yaml]);

  const draft = async () => {
    setDrafting(true);
    setDraftNote(null);
    try {
      const d = await api.draftCheck(session, concern);
      setYaml(d.yaml);
      setPreview({ busy: false });
      setSaved({ busy: false });
      setDraftNote({ text: `Drafted a ${d.kind} (not saved): read it, preview it, then save it.`, warnings: d.warnings.map(shown) });
    } catch (err) {
      setDraftNote({ text: failure(err), warnings: [] });
    } finally {
      setDrafting(false);
    }
  };

  const runPreview = async () => {
    const n = runCount(runs);
    setRuns(String(n));
    setPreview({ busy: true });
    try {
      setPreview({ busy: false, result: await api.previewCheck(session, yaml, n), yaml });
    } catch (err) {
      const problems = problemsOf(err);
      if (problems) setValidation({ state: 'bad', problems });
      setPreview({ busy: false, error: problems ? 'The check does not validate: see the problems under it.' : failure(err) });
    }
  };

  const save = async () => {
    setSaved({ busy: true });
    try {
      const r = await api.saveCheck(session, yaml);
      setSaved({ busy: false, text: shown(`${r.created ? 'Saved' : 'Replaced'} ${r.check.id}: in effect now.${r.warnings.length ? ' ' + r.warnings.join(' ') : ''}`) });
      onSaved(r.check.id);
    } catch (err) {
      const problems = problemsOf(err);
      if (problems) setValidation({ state: 'bad', problems });
      setSaved({ busy: false, error: problems ? 'Not saved: the check does not validate.' : failure(err) });
    }
  };

  const problems = validation.state === 'bad' ? validation.problems : [];
  const stale = !!preview.result && preview.yaml !== yaml;
  return (
    <section aria-labelledby="write" className="authoring">
      <div>
        <h2 id="write">Write a check</h2>
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            void draft();
          }}
        >
          <label htmlFor="concern">New check from a concern</label>
          <input id="concern" type="text" value={concern} onChange={(e) => setConcern(e.target.value)} placeholder="refunds issued without looking up the order first" />
          <button type="submit" disabled={drafting || !concern.trim()}>
            {drafting ? 'Drafting…' : 'Draft'}
          </button>
        </form>
        {draftNote && (
          <div role="status" className="meta">
            {draftNote.text}
            {draftNote.warnings.map((w) => (
              <div key={w} className="badge warn">
                {w}
              </div>
            ))}
          </div>
        )}
        <div ref={editor}>
          <CodeEditor label="Check YAML" value={yaml} onChange={setYaml} problems={problems} />
        </div>
        <p aria-live="polite" className="meta validation">
          {validation.state === 'checking' && 'Validating…'}
          {validation.state === 'ok' && <span className="ok">Valid.{validation.warnings.length > 0 && ` ${shown(validation.warnings.join(' '))}`}</span>}
          {validation.state === 'bad' && <span className="error">{problems.length === 1 ? '1 problem' : `${problems.length} problems`}</span>}
          {validation.state === 'failed' && <span className="error">Could not validate: {validation.error}</span>}
        </p>
        <div className="row">
          <label htmlFor="preview-runs">Recent runs</label>
          <input
            id="preview-runs"
            type="number"
            min={1}
            max={MAX_RUNS}
            value={runs}
            onChange={(e) => setRuns(e.target.value)}
            onBlur={() => setRuns(String(runCount(runs)))}
            style={{ width: '5rem' }}
          />
          <button type="button" onClick={() => void runPreview()} disabled={preview.busy || !yaml.trim()}>
            {preview.busy ? 'Previewing…' : 'Preview on recent runs'}
          </button>
          <button type="button" onClick={() => void save()} disabled={saved.busy || !yaml.trim() || validation.state === 'bad'}>
            Save
          </button>
        </div>
        {saved.text && <p role="status" className="ok">{saved.text}</p>}
        {saved.error && <p role="alert" className="error">{saved.error}</p>}
      </div>
      <div>
        <h2 id="preview">Preview</h2>
        {!preview.result && !preview.error && <p className="empty">Preview a check to see which of the project's recent runs it would flag; nothing is saved and no note reaches an agent.</p>}
        {preview.error && <p role="alert" className="error">{preview.error}</p>}
        {preview.result && <PreviewResult result={preview.result} base={base} stale={stale} />}
      </div>
    </section>
  );
}

function PreviewResult({ result: r, base, stale }: { result: CheckPreview; base: string; stale: boolean }) {
  return (
    <div aria-labelledby="preview" role="region" className={stale ? 'stale' : undefined}>
      {stale && (
        <p role="status" className="stale-note">
          The YAML has changed since this preview: preview again to see what it flags now.
        </p>
      )}
      <p>
        <code>
          <Ext>{r.check.id}</Ext>
        </code>{' '}
        would flag <strong>{r.runs.flagged}</strong> of {r.runs.checked} runs.
      </p>
      <p className="meta">{r.bounds}</p>
      {r.warnings.map((w) => (
        <p key={w} className="badge warn">
          <Ext text>{w}</Ext>
        </p>
      ))}
      <ul className="plain flagged-runs">
        {r.flagged.map((run) => (
          <li key={run.run_id}>
            <Link to={`${base}/runs/${encodeURIComponent(run.run_id)}`}>
              <Ext>{run.run_id}</Ext>
            </Link>{' '}
            <span className="meta">
              <Ext>{run.workflow}</Ext>
            </span>
            <ul>
              {run.findings.map((f, i) => (
                <li key={i}>
                  <Ext>{String(f.title ?? f.check_id)}</Ext> <span className="meta">(count {String(f.count ?? 1)})</span>
                  {typeof f.quote === 'string' && <> · “<Ext text>{f.quote}</Ext>”</>}
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
      {r.not_checked.length > 0 && (
        <>
          <h3>Not checked</h3>
          <ul className="plain">
            {r.not_checked.map((n) => (
              <li key={n.run_id}>
                <code>
                  <Ext>{n.run_id}</Ext>
                </code>
                : <Ext text>{n.reason}</Ext>
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
