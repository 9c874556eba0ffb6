import { useCallback, useEffect, useState } from 'react';
import { Checks } from './pages/Checks';
import { Ext } from './components/Ext';
import { shown } from './format';
import { Home } from './pages/Home';
import { Insights } from './pages/Insights';
import { Models } from './pages/Models';
import { PatternPage } from './pages/PatternPage';
import { Procedures } from './pages/Procedures';
import { Review } from './pages/Review';
import { RunPage } from './pages/RunPage';
import { Runs } from './pages/Runs';
import { Sessions } from './pages/Sessions';
import { SopSessionPage } from './pages/SopSessionPage';
import { SignIn } from './pages/SignIn';
import { Link, navigate, useWhere } from './router';
import { clearSession, loadSession, type Session } from './session';
import { ThemeToggle } from './theme';
import { PageTitle } from './title';

/**
 * Pages live under /p/{project}/...: a shared link names its project, and opening it asks for
 * that project's key first, then shows the same view.
 */
export function App() {
  const where = useWhere();
  const [session, setSession] = useState<Session | null>(loadSession);
  const [note, setNote] = useState<string | undefined>();

  useEffect(() => {
    const expired = () => {
      clearSession();
      setSession(null);
      setNote('Your API key was refused; sign in again.');
    };
    window.addEventListener('neatroots:unauthorized', expired);
    return () => window.removeEventListener('neatroots:unauthorized', expired);
  }, []);

  const m = /^\/p\/([^/]+)(\/.*)?$/.exec(where.path);
  // null: the link's project is no name (a malformed % escape, /p/%zz/): no such page.
  const project = m ? decoded(m[1]) : undefined;
  const rest = (m?.[2] ?? '/').replace(/\/+$/, '') || '/';
  const signingIn = project !== null && (!session || (project !== undefined && session.project !== project));

  // The tab's title (and so the history entry's) names the page: "Runs · neatroots", "Run r1 · neatroots".
  // A page that reads a better name (a session's external id, a pattern's name) gives it for its path.
  const [named, setNamed] = useState<{ path: string; title: string } | null>(null);
  const path = where.path;
  const nameTitle = useCallback((t: string) => setNamed({ path, title: t }), [path]);
  const title = project === null ? 'No such page' : signingIn ? 'Sign in' : m ? (named?.path === path ? named.title : pageTitle(rest)) : undefined;
  useEffect(() => {
    document.title = title ? `${shown(title)} · neatroots` : 'neatroots';
  }, [title]);

  useEffect(() => {
    if (!m && session) navigate(`/p/${encodeURIComponent(session.project)}/`, { replace: true });
  }, [m, session]);

  if (project === null) return <NoSuchPage home="/" />;
  if (signingIn) {
    return (
      <SignIn
        key={project ?? ''}
        project={project}
        note={note ?? (project && session ? `Sign in to project ${shown(project)}.` : undefined)}
        onSignedIn={(s) => {
          setNote(undefined);
          setSession(s);
          // A shared link for this project opens as it was; otherwise the project's home.
          if (project !== s.project) navigate(`/p/${encodeURIComponent(s.project)}/`, { replace: true });
        }}
      />
    );
  }
  if (!m || !session) return null;

  const base = `/p/${encodeURIComponent(session.project)}`;
  const signOut = () => {
    clearSession();
    setSession(null);
    navigate('/');
  };
  const run = idIn(rest, /^\/runs\/([^/]+)$/);
  const sopSession = idIn(rest, /^\/sessions\/([^/]+)$/);
  const pattern = idIn(rest, /^\/patterns\/([^/]+)$/);
  const page =
    rest === '/' ? <Home session={session} base={base} />
    : rest === '/runs' ? <Runs key={where.query.toString()} session={session} base={base} where={where} />
    : run !== null ? <RunPage session={session} base={base} runId={run} where={where} />
    : rest === '/checks' ? <Checks session={session} base={base} />
    : rest === '/sessions' ? <Sessions key={where.query.toString()} session={session} base={base} where={where} />
    : sopSession !== null ? <SopSessionPage session={session} base={base} id={sopSession} />
    : rest === '/procedures' ? <Procedures session={session} />
    : rest === '/review' ? <Review session={session} base={base} where={where} />
    : pattern !== null ? <PatternPage key={pattern} session={session} base={base} id={pattern} />
    : rest === '/insights' ? <Insights session={session} base={base} where={where} />
    : rest === '/settings/models' ? <Models session={session} />
    : <NoSuchPage home={`${base}/`} />;
  const tab = (to: string, label: string, on: boolean) => (
    <Link to={`${base}${to}`} aria-current={on ? 'page' : undefined}>
      {label}
    </Link>
  );

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">neatroots</span>
        <nav aria-label="Pages">
          {tab('/', 'Home', rest === '/')}
          {tab('/runs', 'Runs', rest.startsWith('/runs'))}
          {tab('/checks', 'Checks', rest === '/checks')}
          {tab('/sessions', 'Sessions', rest.startsWith('/sessions'))}
          {tab('/procedures', 'Procedures', rest === '/procedures')}
          {tab('/review', 'Review', rest === '/review' || rest.startsWith('/patterns/'))}
          {tab('/insights', 'Insights', rest === '/insights')}
          {tab('/settings/models', 'Settings → Models', rest === '/settings/models')}
        </nav>
        <span className="project" title="Signed in to this project">
          <Ext>{session.project}</Ext>
        </span>
        <ThemeToggle />
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <PageTitle.Provider value={nameTitle}>{page}</PageTitle.Provider>
    </>
  );
}

function NoSuchPage({ home }: { home: string }) {
  return (
    <main id="main">
      <h1>No such page</h1>
      <p>
        <Link to={home}>Home</Link>
      </p>
    </main>
  );
}

/** A path segment decoded, or null when it does not decode (a malformed % escape such as %zz, which a link can hold). */
function decoded(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The id `re` captures in the path, decoded; null when the path is not one, or its id does not decode (no such page). */
function idIn(rest: string, re: RegExp): string | null {
  const m = re.exec(rest);
  return m ? decoded(m[1]) : null;
}

/** A page's name for the tab's title, from its path under /p/{project}. */
function pageTitle(rest: string): string {
  const id = (re: RegExp) => idIn(rest, re);
  const fixed: Record<string, string> = {
    '/': 'Home',
    '/runs': 'Runs',
    '/checks': 'Checks',
    '/sessions': 'Sessions',
    '/procedures': 'Procedures',
    '/review': 'Review',
    '/insights': 'Insights',
    '/settings/models': 'Settings → Models',
  };
  if (fixed[rest]) return fixed[rest];
  const run = id(/^\/runs\/([^/]+)$/);
  if (run !== null) return `Run ${run}`;
  const session = id(/^\/sessions\/([^/]+)$/);
  if (session !== null) return `Session ${session}`;
  const pattern = id(/^\/patterns\/([^/]+)$/);
  if (pattern !== null) return `Pattern ${pattern}`;
  return 'No such page';
}
