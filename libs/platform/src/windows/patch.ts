/**
 * What one save changed in a window, as the window journal records it: a list of edits to the
 * window's JSON, instead of the whole window. A run's window holds every span id it has seen
 * and, for question checks, a ring of the last spans; written whole on every save it cost the
 * embedded default about a fifth of its CPU and 25 MB of fsynced journal a second at 5,000
 * spans/s. An edit is one of
 *
 *   { p: path, v: value }      the value at path set (an object or array whole)
 *   { p: path }                the key at path removed
 *   { p: path, s: n, a: [..] } the array at path shifted by n, then `a` appended (a ring, a list that grows)
 *
 * Edits are relative to the window as last journaled: the journal applies a window's edits in
 * order over its last whole record, and skips those its snapshot already holds (journal.ts).
 */
export type Edit = { p: string[]; v: unknown } | { p: string[] } | { p: string[]; s: number; a: unknown[] };

type Obj = Record<string, unknown>;

const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

/** A key set as an own property even when it is `__proto__` (a span id is whatever an agent sends). */
function setKey(o: Obj, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  else o[k] = v;
}

/**
 * A key's JSON value: what an object inherits from Object.prototype (`constructor`, `__proto__`,
 * `toString`: names a span id may have) is not a key it holds.
 */
function get(o: Obj, k: string): unknown {
  const v = o[k];
  if (v === undefined || (typeof v !== 'function' && k !== '__proto__')) return v;
  if (k === '__proto__') {
    for (let l: Obj | null = o; l !== null && l !== Object.prototype; l = Object.getPrototypeOf(l) as Obj | null) if (Object.prototype.hasOwnProperty.call(l, k)) return l[k];
    return undefined;
  }
  return undefined;
}

/**
 * A copy of a JSON value as JSON.stringify would see it, except that keys a step layered under
 * an object (Object.create) are copied too: for..in reads them, JSON.stringify would not.
 */
export function copyJson<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return copyItems(v, 0) as T;
  const out: Obj = {};
  for (const k in v) {
    const x = get(v as Obj, k);
    if (x !== undefined) setKey(out, k, copyJson(x));
  }
  return out as T;
}

/**
 * Copies of `a`'s items from `from` on, in an array made at its size, as `a.slice(from).map(..)`
 * made them without the slice and the callback: undefined as null (as JSON has it), a hole left
 * a hole.
 */
function copyItems(a: readonly unknown[], from: number): unknown[] {
  const n = a.length - from;
  const out = new Array<unknown>(n);
  for (let i = 0; i < n; i++) {
    const x = a[from + i];
    if (x !== undefined) out[i] = copyJson(x);
    else if (from + i in a) out[i] = null;
  }
  return out;
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!same(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  // The common case first, without allocating: keys holding JSON values (the journal's copy never
  // holds undefined, so its keys are counted as they are).
  let plain = true;
  let count = 0;
  for (const k in b as Obj) {
    const y = (b as Obj)[k];
    if (y === undefined || typeof y === 'function' || k === '__proto__') {
      plain = false;
      break;
    }
    const x = (a as Obj)[k];
    if (x !== y && (typeof y !== 'object' || !same(x, y))) return false;
    count++;
  }
  if (plain) {
    for (const k in a as Obj) if (k === '__proto__' || count-- === 0) return false;
    return count === 0;
  }
  let n = 0;
  for (const k in b as Obj) {
    const y = get(b as Obj, k);
    if (y === undefined) continue;
    n++;
    if (!same(get(a as Obj, k), y)) return false;
  }
  let m = 0;
  for (const k in a as Obj) if (get(a as Obj, k) !== undefined) m++;
  return n === m;
}

/**
 * An edit's path: `path`, then `k`, in an array of its own made at its size. `[...path, k]`
 * copied `path`, then grew the copy for `k` by half again and 16 slots: an edit's path and object
 * took 250 bytes where these take 112, on every edit of every checkpoint.
 */
function pathTo(path: readonly string[], k: string): string[] {
  const n = path.length;
  const p = new Array<string>(n + 1);
  for (let i = 0; i < n; i++) p[i] = path[i];
  p[n] = k;
  return p;
}

/** The number of keys a copy holds (objects the journal keeps only): lets a save that removed nothing skip looking for removals. */
const SIZE = Symbol('keys');

type Counted = Obj & { [SIZE]?: number };

/**
 * The edits that turn `old` into `next`, appended to `out`; `old` (the journal's own copy of
 * the window as last journaled, never handed out) is brought up to `next` as it goes.
 *
 * Costs a look-up per key: a run's thousands of span ids are compared, not serialized. Keys a
 * step layered over another object (Object.create) are read level by level (for..in over a
 * prototype chain is several times slower than each level's own keys).
 */
export function diffInto(old: Counted, next: Obj, out: Edit[], path: string[] = [], over?: ReadonlyMap<string, Obj | typeof JOURNALED>): void {
  let keys = 0;
  let kept = 0;
  for (let level: Obj | null = next; level !== null && level !== Object.prototype; level = Object.getPrototypeOf(level) as Obj | null) {
    for (const k of Object.keys(level)) {
      // A key at two levels is read once, at the nearest.
      if (level !== next && ownAbove(next, level, k)) continue;
      const n = get(next, k);
      if (n === undefined) continue;
      keys++;
      const o = get(old, k);
      if (o !== undefined) kept++;
      const layer = over?.get(k);
      if (layer === JOURNALED) continue;
      if (layer !== undefined && isObj(o)) {
        path.push(k);
        layerInto(o, layer, out, path);
        path.pop();
      } else diffKey(old, k, o, n, out, path);
    }
  }
  // Every key of `old` is still in `next` when as many were found there as `old` had.
  if (old[SIZE] === undefined || kept !== old[SIZE]) {
    for (const k in old) {
      if (get(next, k) === undefined) {
        out.push({ p: pathTo(path, k) });
        delete old[k];
      }
    }
    keys = Object.keys(old).length;
  }
  old[SIZE] = keys;
}

/** In diffInto's `over`: a field whose edits are written already (shiftInto). */
export const JOURNALED = Symbol('journaled');

/**
 * The edit of a top-level array field its caller says was only shifted (`dropped` items removed
 * from its start, `appended` added at its end: markShifted in @neatroots/ports), appended to
 * `out` and made to `old`, the journal's copy, without comparing the items; a shift that
 * dropped every item the copy held is the array written whole. False, and nothing written,
 * when the counts do not fit the two arrays' lengths (the caller then gets compared).
 */
export function shiftInto(old: Obj, k: string, next: unknown, dropped: number, appended: number, out: Edit[]): boolean {
  const o = get(old, k);
  if (!Array.isArray(o) || !Array.isArray(next) || !(dropped >= 0) || !(appended >= 0) || o.length - dropped + appended !== next.length) return false;
  if (dropped >= o.length && next.length > 0) writeWhole(old, k, next, out, []);
  else if (dropped > 0 || appended > 0) writeShift(o, k, next, dropped, out, []);
  return true;
}

/** The value at `k` written whole: the edit, and the journal's copy brought along. */
function writeWhole(old: Obj, k: string, n: unknown, out: Edit[], path: string[]): void {
  const v = copyJson(n);
  out.push({ p: pathTo(path, k), v });
  setKey(old, k, v);
}

/** The array at `k` (the copy `o`) shifted by `s`, then the rest of `n` appended: the edit, and the copy brought along. */
function writeShift(o: unknown[], k: string, n: unknown[], s: number, out: Edit[], path: string[]): void {
  // More dropped than the copy held happens only when nothing is left (shiftInto writes the
  // array whole otherwise): no item of `n` to append, as n.slice of a negative start gave.
  const a = copyItems(n, Math.max(0, o.length - s));
  out.push({ p: pathTo(path, k), s, a });
  o.splice(0, s);
  for (const x of a) o.push(x);
}

/**
 * The edits of a field the caller changed as a layer (WindowStore.loadsStored, windowLayer):
 * only the layer's own entries were added or changed over the stored field, which the journal's
 * copy mirrors, so only they are compared (a run's span ids are not scanned on every save).
 */
function layerInto(old: Counted, layer: Obj, out: Edit[], path: string[]): void {
  let added = 0;
  for (const k of Object.keys(layer)) {
    const n = get(layer, k);
    const o = get(old, k);
    if (n === undefined) {
      // an entry set to undefined over the stored one: gone, as JSON has it
      if (o !== undefined) {
        out.push({ p: pathTo(path, k) });
        delete old[k];
        added--;
      }
      continue;
    }
    if (o === undefined) added++;
    diffKey(old, k, o, n, out, path);
  }
  if (old[SIZE] !== undefined) old[SIZE] += added;
}

function diffKey(old: Counted, k: string, o: unknown, n: unknown, out: Edit[], path: string[]): void {
  if (o === n && (typeof n !== 'object' || n === null)) return;
  if (isObj(n) && isObj(o)) {
    path.push(k);
    diffInto(o, n, out, path);
    path.pop();
    return;
  }
  if (Array.isArray(n) && Array.isArray(o)) {
    // Still empty: the checks' lists are mostly so (a streak not started, nothing pending), and
    // each one was written whole on every save.
    if (n.length === 0 && o.length === 0) return;
    const shift = shiftOf(o, n);
    if (shift === 0 && o.length === n.length) return;
    if (shift >= 0) {
      writeShift(o, k, n, shift, out, path);
      return;
    }
  }
  writeWhole(old, k, n, out, path);
}

/** Whether `k` is an own key of a level of `from`'s chain above `level`. */
function ownAbove(from: Obj, level: Obj, k: string): boolean {
  for (let o: Obj = from; o !== level; o = Object.getPrototypeOf(o) as Obj) if (Object.prototype.hasOwnProperty.call(o, k)) return true;
  return false;
}

/**
 * How far `next` is `old` shifted (its first items dropped, others appended), or -1: the array
 * is then written whole. Only the first place `next` could start in `old` is tried: a ring moves
 * by the items a step added, a list that only grows by none.
 */
function shiftOf(old: unknown[], next: unknown[]): number {
  if (!next.length) return -1;
  let s = 0;
  while (s < old.length && !same(old[s], next[0])) s++;
  if ((s === old.length && s > 0) || next.length < old.length - s) return -1;
  for (let i = 1; i < old.length - s; i++) if (!same(old[s + i], next[i])) return -1;
  return s;
}

/** Applies edits (as diffInto wrote them) to a window, in place. */
export function applyEdits(w: Obj, edits: readonly Edit[]): void {
  for (const e of edits) {
    let at = w;
    for (let i = 0; i < e.p.length - 1; i++) {
      const next = get(at, e.p[i]);
      if (isObj(next)) at = next;
      else {
        const made: Obj = {};
        setKey(at, e.p[i], made);
        at = made;
      }
    }
    const k = e.p[e.p.length - 1];
    if ('s' in e) {
      const cur = get(at, k);
      const arr = Array.isArray(cur) ? cur : [];
      arr.splice(0, e.s);
      for (const x of e.a) arr.push(x);
      setKey(at, k, arr);
    } else if ('v' in e) setKey(at, k, e.v);
    else delete at[k];
  }
}

export { isObj as isJsonObject };
