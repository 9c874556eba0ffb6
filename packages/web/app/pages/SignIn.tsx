import { useEffect, useState, type FormEvent } from 'react';
import { api, ApiFailure } from '../api';
import { failure, passing, retrying, useRetryAfter503 } from '../load';
import { saveSession, type Session } from '../session';

/**
 * Sign in with a project and one of its API keys (NEATROOTS_API_KEYS, or the key `neatroots
 * start` prints). The key is tried against the API before it is kept; it stays in this tab's
 * session storage only. A failure that will pass (503: the review service of the distributed
 * deployment away a moment, so the key cannot be checked) is said, not taken for a wrong key, and
 * the key is tried again by itself as the other pages read again (load.ts), until the API answers;
 * changing the project or key stops that, Sign in tries again at once.
 */
export function SignIn(props: { project?: string; note?: string; onSignedIn(s: Session): void }) {
  const [project, setProject] = useState(props.project ?? '');
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  /** What was given to sign in with, being tried against the API (again after a 503); null: nothing. */
  const [trying, setTrying] = useState<Session | null>(null);
  const retry = useRetryAfter503([trying]);

  useEffect(() => {
    if (!trying) return;
    let live = true;
    setBusy(true);
    api.runs(trying, { limit: 1 }).then(
      () => {
        if (!live) return;
        retry.ok();
        saveSession(trying);
        props.onSignedIn(trying);
      },
      (err: unknown) => {
        if (!live) return;
        setBusy(false);
        if (passing(err)) {
          // The key could not be checked: said so, and tried again.
          setError(retrying(err));
          return retry.later();
        }
        setTrying(null);
        setError(
          err instanceof ApiFailure && err.status === 401 ? 'That API key is not valid.'
          // An agent's key (NEATROOTS_API_KEYS=project=key:ingest) sends spans and nothing else.
          : err instanceof ApiFailure && err.status === 403 && err.message.includes('(scope ingest)') ? 'That key may only send spans (scope ingest): sign in with a full key of the project.'
          : err instanceof ApiFailure && err.status === 403 ? `That API key does not open project ${trying.project}.`
          : failure(err),
        );
      },
    );
    return () => {
      live = false;
      setBusy(false);
    };
    // props.onSignedIn is a new closure each render: what is tried says when to try.
  }, [trying, retry.tick]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    const s = { project: project.trim(), key: key.trim() };
    if (!s.project || !s.key) {
      setTrying(null);
      return setError('Give the project and its API key.');
    }
    setError(null);
    // A new object: tried at once, a try again still waiting dropped, its count started again.
    setTrying(s);
  };
  /** A field changed: set; while its old value was being tried again, that stops. */
  const edited = (set: (v: string) => void, value: string) => {
    set(value);
    if (!trying) return;
    setTrying(null);
    setError(null);
  };

  return (
    <main id="main" className="sign-in">
      <h1>Sign in to neatroots</h1>
      {props.note && <p>{props.note}</p>}
      <form onSubmit={submit} aria-label="Sign in">
        <label>
          Project
          <input name="project" autoComplete="username" value={project} onChange={(e) => edited(setProject, e.target.value)} autoFocus={!props.project} />
        </label>
        <label>
          API key
          <input name="key" type="password" autoComplete="current-password" value={key} onChange={(e) => edited(setKey, e.target.value)} autoFocus={!!props.project} />
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
