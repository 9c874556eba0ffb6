import { createContext, useContext, useEffect } from 'react';

/**
 * How a page names itself in the tab's title once its data is read (a session by its external
 * id, a pattern by its name): App titles every page from its path, and a page that knows a
 * better name gives it here, for the path it is on.
 */
export const PageTitle = createContext<(title: string) => void>(() => {});

/** The page's name for the tab's title, once it has one (null: the path's name stays). */
export function usePageTitle(title: string | null): void {
  const name = useContext(PageTitle);
  useEffect(() => {
    if (title) name(title);
  }, [title, name]);
}
