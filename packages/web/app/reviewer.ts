/** The reviewer's name as given on a pattern page, kept for the browser tab (sent with verdicts, overrides and suggestions). */
const KEY = 'neatroots.reviewer';

export function reviewer(): string {
  return sessionStorage.getItem(KEY) ?? '';
}

export function rememberReviewer(name: string): void {
  if (name.trim()) sessionStorage.setItem(KEY, name.trim());
}

/** The reviewer field of a body: left out when no name was given. */
export function byReviewer(): { reviewer?: string } {
  const r = reviewer();
  return r ? { reviewer: r } : {};
}
