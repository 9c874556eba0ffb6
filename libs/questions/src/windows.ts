import type { WindowStore } from '@neatroots/ports';

/** Saves windows with compare-and-set on the revision they were loaded with. */
export async function saveWindows<W extends { rev?: number }>(store: WindowStore<W>, windows: { key: string; window: W; ttlMs: number }[]): Promise<void> {
  if (!windows.length) return;
  const entries = windows.map(({ key, window, ttlMs }) => {
    const expectRev = window.rev ?? 0;
    return { key, window: { ...window, rev: expectRev + 1 }, ttlMs, expectRev };
  });
  await store.save(entries);
  windows.forEach((w, i) => (w.window.rev = entries[i].expectRev + 1));
}
