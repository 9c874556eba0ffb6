import { useEffect, useState } from 'react';

type Theme = 'light' | 'dark';
const KEY = 'neatroots.theme';

/** The theme chosen last (kept on this browser), else the system's. */
export function initialTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  if (saved === 'light' || saved === 'dark') return saved;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

export function applyTheme(t: Theme): void {
  document.documentElement.dataset.theme = t;
}

export function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(() => (document.documentElement.dataset.theme as Theme) || initialTheme());
  useEffect(() => applyTheme(theme), [theme]);
  const other: Theme = theme === 'dark' ? 'light' : 'dark';
  return (
    <button
      type="button"
      aria-label={`Switch to the ${other} theme`}
      onClick={() => {
        localStorage.setItem(KEY, other);
        setTheme(other);
      }}
    >
      {other === 'dark' ? 'Dark' : 'Light'} theme
    </button>
  );
}
