import { useState, type FormEvent } from 'react';
import { api, ApiFailure } from '../api';
import { failure } from '../load';
import { saveSession, type Session } from '../session';

/**
 * Sign in with a project and one of its API keys (NEATROOTS_API_KEYS, or the key `neatroots
 * start` prints). The key is tried against the API before it is kept; it stays in this tab's
 * session storage only.
 */
export function SignIn(props: { project?: string; note?: string; onSignedIn(s: Session): void }) {
  const [project, setProject] = useState(props.project ?? '');
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const s = { project: project.trim(), key: key.trim() };
    if (!s.project || !s.key) return setError('Give the project and its API key.');
    setBusy(true);
    setError(null);
    try {
      await api.runs(s, { limit: 1 });
      saveSession(s);
      props.onSignedIn(s);
    } catch (err) {
      setError(
        err instanceof ApiFailure && err.status === 401 ? 'That API key is not valid.'
        // An agent's key (NEATROOTS_API_KEYS=project=key:ingest) sends spans and nothing else.
        : err instanceof ApiFailure && err.status === 403 && err.message.includes('(scope ingest)') ? 'That key may only send spans (scope ingest): sign in with a full key of the project.'
        : err instanceof ApiFailure && err.status === 403 ? `That API key does not open project ${s.project}.`
        : failure(err),
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" className="sign-in">
      <h1>Sign in to neatroots</h1>
      {props.note && <p>{props.note}</p>}
      <form onSubmit={submit} aria-label="Sign in">
        <label>
          Project
          <input name="project" autoComplete="username" value={project} onChange={(e) => setProject(e.target.value)} autoFocus={!props.project} />
        </label>
        <label>
          API key
          <input name="key" type="password" autoComplete="current-password" value={key} onChange={(e) => setKey(e.target.value)} autoFocus={!!props.project} />
        </label>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
      </form>
      <p className="meta">The key is kept in this browser tab only, until you sign out or close it.</p>
    </main>
  );
}
