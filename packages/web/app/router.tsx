import { useEffect, useState, type AnchorHTMLAttributes, type MouseEvent } from 'react';

/**
 * The app's pages are real paths (/p/{project}/runs/{run}?span=...): every view is a link that
 * can be shared, and the api answers any of them with the app. A small router over the
 * history API; no dependency.
 */
export interface Where {
  path: string;
  query: URLSearchParams;
}

const CHANGE = 'neatroots:navigate';

function here(): Where {
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

export function useWhere(): Where {
  const [where, setWhere] = useState(here);
  useEffect(() => {
    const on = () => setWhere(here());
    window.addEventListener('popstate', on);
    window.addEventListener(CHANGE, on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener(CHANGE, on);
    };
  }, []);
  return where;
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.dispatchEvent(new Event(CHANGE));
}

/** A path with its query (empty values left out). */
export function href(path: string, query: Record<string, string | undefined | null> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  return q.size ? `${path}?${q}` : path;
}

/** An ordinary link (opens in a new tab with a modifier key), followed in the app otherwise. */
export function Link({ to, onClick, ...rest }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const click = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={to} onClick={click} {...rest} />;
}
