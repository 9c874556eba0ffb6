/** One window to save (WindowStore.save). */
export interface WindowSave<W> {
  key: string;
  window: W;
  ttlMs?: number;
  expectRev?: number;
  wakeAtMs?: number | null;
  /**
   * The run is over (it ended): the window stays for its TTL, for a late span or a redelivered
   * batch, but nothing is expected to load it soon. The embedded stores keep only a bounded
   * number of such windows in memory (the rest wait in the spill file, read back if their run
   * speaks again) and write their next save whole rather than as edits; Redis ignores it.
   */
  rest?: boolean;
}

/**
 * The window-store port: each run's rule-engine state (counters, streaks, last calls,
 * pending requires_before waits), kept outside the process so any replica can continue
 * a run where another stopped. Redis in the distributed deployment, memory embedded.
 * Values are plain JSON-serialisable objects owned by the rule engine.
 */
export interface WindowStore<W> {
  /**
   * The windows of these runs (missing ones absent from the map). `members`: for a key, the
   * entries of its record fields the caller will read (the rule engine: the batch's span ids in
   * `seen`). A store that keeps such fields apart (WindowStoreOptions.memberFields: Redis, once a
   * field is large) may load only those entries: the field then holds the asked ones it has, so
   * a caller reads it one entry at a time and never lists it. What the caller adds is saved as
   * additions. Other stores load whole windows and ignore it.
   */
  load(keys: readonly string[], members?: ReadonlyMap<string, Readonly<Record<string, readonly string[]>>>): Promise<Map<string, W>>;
  /**
   * Writes each window; `ttlMs` makes it expire that long after this write. With
   * `expectRev` on an entry, the write is a compare-and-set: the store keeps a revision per
   * key (0 for a key never saved, or expired), and if any entry's revision is not the one
   * expected nothing is written and WindowConflictError is thrown (another replica saved
   * the run meanwhile: the caller starts its step again from a fresh load). A successful
   * write sets the revision to expectRev + 1. With `wakeAtMs` on an entry, a store that
   * `savesWakes` sets the key's wake time as setWakes would (null: none), in the same write.
   * With `rest`, the run is over: the window is kept (its TTL) for late records and
   * redeliveries but is not expected back soon, so a store that holds windows in memory may
   * move it out of memory (see WindowSave).
   */
  save(entries: readonly WindowSave<W>[]): Promise<void>;
  delete(keys: readonly string[]): Promise<void>;
  /** Asks to be woken for `key` at `atMs` (a requires_before wait). Later calls for the same key keep the earliest time. */
  wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void>;
  /** Sets each key's wake time exactly (null: no wake), after a step saved its window. */
  setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void>;
  /**
   * Keys whose wake time is at or before `nowMs`. Without `leaseMs` they are removed from the
   * schedule as they are returned; with it they are moved `leaseMs` later, so a step that dies
   * before it saves is tried again (and setWakes then settles them).
   */
  takeDue(nowMs: number, limit: number, leaseMs?: number): Promise<string[]>;
  /**
   * Drops the wake times of those of these keys that have no window now (it expired, was
   * deleted, or was evicted), in one step with that look: a window saved meanwhile keeps its
   * wake. The rule engine's tick calls it for the keys it took and found no window for (their
   * wake would otherwise be leased again and again). Absent: the caller sets them to none
   * (setWakes).
   */
  clearOrphanWakes?(keys: readonly string[]): Promise<void>;
  close(): Promise<void>;
  /**
   * True when every change is applied as the call is made (a load, save or takeDue made after
   * it sees it, even before its promise resolves) and becomes durable in the order the calls
   * were made; the promise says it is durable (the embedded stores: memory, and the journal
   * whose fsync the promise waits for). A caller may then start its next step on the same
   * windows while the last save is still syncing. Absent (Redis): a change is seen only once
   * its promise resolved, and a compare-and-set save must be waited for before the next load.
   */
  readonly appliedAtCall?: boolean;
  /**
   * True when save sets the entries' wake times (`wakeAtMs`) in the same all-or-nothing write as
   * the windows (Redis: one script, so a step's save and wakes cost one round trip and are never
   * half done). Absent: the caller sets them with setWakes once the save went through.
   */
  readonly savesWakes?: boolean;
  /**
   * True when load hands out the windows the store holds, not copies (the embedded stores;
   * Redis's load parses a new copy each time). What a caller changes in a loaded window is
   * then in the store at once, saved or not: a caller whose step may never be saved (its
   * findings' publish failed) either changes a copy, or keeps what the step led to until a
   * later step on the same windows is saved (the rule engine: engine.ts, `unsaved`).
   *
   * A store that journals each save as its edits (JournalWindowStore) compares the saved window
   * with its own copy of the last one. Three ways spare it comparing a large field (a long run's
   * thousands of span ids, a ring of span summaries) on every save:
   * - a field that is a layer (`windowLayer`: a record of entries added over the loaded window's
   *   field) is taken as that field with the layer's entries added, merged once the save is
   *   decided;
   * - a field changed in place whose added keys the saved window names (`addedKeys`) is compared
   *   at those keys only;
   * - an array field the saved window says was only shifted (`shiftedArrays`: items dropped from
   *   its start, appended at its end) is journaled as that shift, its items not compared.
   */
  readonly loadsStored?: boolean;
  /**
   * Coalesced saves (the journaled embedded store): from this call on, a save is applied at
   * once and made durable at the next checkpoint (every `everyMs`), one record per window
   * however often it was saved since; its promise resolves then. A checkpoint writes only the
   * windows no caller is changing: a caller that changes loaded windows in place passes `busy`
   * (true while a step has changed a window it has not saved yet); such a window is written at
   * its next save. Absent: every save is durable on its own.
   */
  coalesce?(opts: { everyMs: number; busy?: (key: string) => boolean }): void;
  /** With coalesced saves: a checkpoint now, for a caller that must wait for its saves (a bus that cannot hold its position for them). */
  checkpoint?(): void;
  /**
   * With coalesced saves, at a caller's stop: the saves waiting for a window `busy` says is still
   * changing fail now, instead of waiting for a next save of it that will not come (a step that
   * failed and will not be done again before the stop). Such a window stays as last made
   * durable: the bus delivers the failed saves' batches again at the next start. Returns how
   * many windows.
   */
  releaseBusy?(): number;
}

/** How a caller opens a window store (Platform.windows). */
export interface WindowStoreOptions {
  /**
   * Record fields only ever added to, read one entry at a time (the rule engine's and the question
   * scheduler's `seen`: a run's span ids, thousands in a long run), that a store may keep apart
   * from the rest of the window: Redis keeps them in a hash beside it once they are large, loads
   * only the entries `load` is asked for, and saves only what a window's field holds (what was
   * loaded and added), never the whole of it again. Entries are never removed but with the
   * window. The embedded stores ignore it.
   */
  memberFields?: readonly string[];
  /**
   * Array fields a caller only appends to and cuts from the start of (the question scheduler's
   * `ring` of a run's latest spans), saying how with markShifted, that a store may keep apart from
   * the rest of the window: Redis keeps each in a list beside it once a save says how it moved, and
   * then saves only the items appended and the count dropped, not the whole array again. The
   * embedded stores ignore it (their journal reads the same shifts).
   */
  listFields?: readonly string[];
}

const ADDED = Symbol.for('neatroots.windowAddedKeys');

/**
 * Names the keys a caller added in place to a record field of the window it saves (see
 * WindowStore.loadsStored), since the window was last saved. Not enumerable: JSON, spreads and
 * copies never see it; it goes with this object only (the one handed to save).
 */
export function markAdded<W extends object>(window: W, added: Readonly<Record<string, readonly string[]>>): W {
  Object.defineProperty(window, ADDED, { value: added, enumerable: false, configurable: true });
  return window;
}

/** The keys a saved window says were added in place to its record fields (markAdded), if it says. */
export function addedKeys(window: object): Readonly<Record<string, readonly string[]>> | undefined {
  return (window as { [ADDED]?: Record<string, readonly string[]> })[ADDED];
}

const SHIFTED = Symbol.for('neatroots.windowShiftedArrays');

/** How an array field changed since the window was last saved (markShifted). */
export interface ArrayShift {
  /** Items removed from its start (those of the array as last saved, then appended ones). */
  dropped: number;
  /** Items added at its end. */
  appended: number;
}

/**
 * Says how a caller changed array fields of the window it saves (see WindowStore.loadsStored),
 * since the window was last saved: items removed from the start and appended at the end, none
 * changed or replaced in place (a ring of the latest items). A store that journals edits then
 * writes that shift without comparing the items. Not enumerable, as markAdded.
 */
export function markShifted<W extends object>(window: W, shifted: Readonly<Record<string, ArrayShift>>): W {
  Object.defineProperty(window, SHIFTED, { value: shifted, enumerable: false, configurable: true });
  return window;
}

/** The array fields a saved window says were only shifted (markShifted), if it says. */
export function shiftedArrays(window: object): Readonly<Record<string, ArrayShift>> | undefined {
  return (window as { [SHIFTED]?: Record<string, ArrayShift> })[SHIFTED];
}

const LAYER_OF = Symbol.for('neatroots.windowLayerOf');

/**
 * An empty record standing for `base` with whatever is set in it added (see
 * WindowStore.loadsStored). Reads of what it does not hold go to `base` (layerBase): not its
 * prototype, as an object used as a prototype is slow to add to and to read by key.
 */
export function windowLayer<T extends object>(base: T): T {
  // A hash table from the start (no prototype: V8 makes it a dictionary): a step's layer gets
  // keys no other object has (span ids), and a plain object would make a new shape for each.
  const layer = Object.create(null) as T;
  Object.defineProperty(layer, LAYER_OF, { value: base });
  return layer;
}

/** The record a layer stands over (undefined: not a layer). */
export function layerBase<T extends object>(v: T): T | undefined {
  return (v as { [LAYER_OF]?: T })[LAYER_OF];
}

/** Another writer saved one of these windows after they were loaded. */
export class WindowConflictError extends Error {
  constructor(readonly keys: string[]) {
    super(`window changed since it was loaded: ${keys.slice(0, 3).join(', ')}${keys.length > 3 ? ', ...' : ''}`);
    this.name = 'WindowConflictError';
  }
}
