import { useState } from 'react';
import { api, ApiFailure } from '../api';
import { failure } from '../load';
import { shown } from '../format';
import type { Session } from '../session';
import type { Head } from '../sop-types';
import { CodeEditor, type LineProblem } from './CodeEditor';

/**
 * A file of head written and saved (PUT head/{path}): sopc compiles head with it, and when it
 * would not compile the API's 422 issues are shown at their line (those of other files with
 * their file's name). A file already at head is opened (GET head/{path}) and edited in
 * place; a new one is written whole.
 */
export function HeadEditor({ session, head, onSaved }: { session: Session; head: Head; onSaved(): void }) {
  const [path, setPath] = useState('procedures/');
  const [text, setText] = useState('');
  const [problems, setProblems] = useState<LineProblem[]>([]);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const exists = head.files.some((f) => f.path === path);

  const open = async () => {
    setBusy(true);
    setResult(null);
    try {
      const file = await api.headFile(session, path);
      setText(file.text);
      setProblems([]);
      setResult({ ok: true, text: `Opened ${file.path} as saved at head (version ${file.version}).` });
    } catch (err) {
      setResult({ ok: false, text: `Not opened: ${failure(err)}` });
    } finally {
      setBusy(false);
    }
  };

  const save = async () => {
    setBusy(true);
    setResult(null);
    try {
      await api.saveHeadFile(session, path, text);
      setProblems([]);
      setResult({ ok: true, text: `Saved ${path} at head. Publish to make it live.` });
      onSaved();
    } catch (err) {
      if (err instanceof ApiFailure && err.issues.length) {
        setProblems(err.issues.map((i) => (i.file === path ? { line: i.line, text: i.message } : { text: `${i.file}:${i.line}: ${i.message}` })));
        setResult({ ok: false, text: `Not saved: head would not compile with ${path}.` });
      } else {
        setProblems([]);
        setResult({ ok: false, text: `Not saved: ${failure(err)}` });
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="edit-head">
      <h2 id="edit-head">Write a file at head</h2>
      <p className="meta">
        The file is compiled with the rest of head by sopc before it is saved. Pick a file of head and open it to edit it, or name a new one{exists ? ` (saving replaces ${path})` : ''}.
      </p>
      <div className="row">
        <label htmlFor="head-path">Path</label>{' '}
        <input id="head-path" type="text" list="head-files" value={path} onChange={(e) => setPath(e.target.value)} size={40} />
        <datalist id="head-files">
          {head.files.map((f) => (
            <option key={f.path} value={f.path} />
          ))}
        </datalist>{' '}
        <button type="button" onClick={() => void open()} disabled={busy || !exists} aria-label={`Open ${path}`}>
          Open
        </button>
      </div>
      <CodeEditor label="File text" value={text} onChange={setText} problems={problems} minRows={10} />
      <p>
        <button type="button" onClick={() => void save()} disabled={busy || !text.trim() || !path.trim() || path.endsWith('/')}>
          Save at head
        </button>
      </p>
      {result && (
        <p role={result.ok ? 'status' : 'alert'} className={result.ok ? 'ok' : 'error'}>
          {shown(result.text)}
        </p>
      )}
    </section>
  );
}
