/**
 * Who is signed in: a project and its API key, kept in this tab's session storage (gone when
 * the tab closes, never in a cookie or the URL).
 */
export interface Session {
  project: string;
  key: string;
}

const KEY = 'neatroots.session';

export function loadSession(): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Session | null;
    return s && typeof s.project === 'string' && typeof s.key === 'string' ? s : null;
  } catch {
    return null;
  }
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
}
