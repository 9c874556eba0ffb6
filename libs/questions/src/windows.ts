import { markShifted, type ArrayShift, type WindowStore } from '@neatroots/ports';

export interface WindowToSave<W> {
  key: string;
  window: W;
  ttlMs: number;
  shifted?: Readonly<Record<string, ArrayShift>>;
  rest?: boolean;
}

/**
 * Saves windows with compare-and-set on the revision they were loaded with. `shifted`: the
 * array fields a step only shifted since the load (markShifted), for a store that journals edits.
 * `rest`: the run ended (WindowSave.rest).
 */
export async function saveWindows<W extends { rev?: number }>(store: WindowStore<W>, windows: WindowToSave<W>[]): Promise<void> {
  if (!windows.length) return;
  const entries = windows.map(({ key, window, ttlMs, shifted, rest }) => {
    const expectRev = window.rev ?? 0;
    const saved = { ...window, rev: expectRev + 1 };
    return { key, window: shifted ? markShifted(saved, shifted) : saved, ttlMs, expectRev, ...(rest ? { rest } : {}) };
  });
  await store.save(entries);
  windows.forEach((w, i) => (w.window.rev = entries[i].expectRev + 1));
}
