import { layerBase } from '@neatroots/ports';

/**
 * The layers of a window being saved into a store that hands out what it holds
 * (WindowStore.loadsStored): a field that is a layer (windowLayer) holds only what the step
 * added over the loaded window's field (the rule engine's span ids seen, thousands in a long
 * run, are not copied for every batch). Each becomes the plain record it stands for: merged into
 * the stored window's own field when that is what it lies over (a few entries set, and the
 * stored window is being replaced by this one), else copied out whole (the stored window was
 * spilled or replaced since). Other fields are left as they are.
 *
 * Called once the save is decided (its compare-and-set passed): a save refused must leave the
 * stored window untouched. Changes `saved` in place: the store keeps it.
 */
export function settleLayers<W>(saved: W, stored: W | undefined): void {
  const s = saved as Record<string, unknown>;
  const before = stored as Record<string, unknown> | undefined;
  for (const k in s) {
    const v = s[k];
    if (typeof v !== 'object' || v === null) continue;
    const base = layerBase(v as Record<string, unknown>);
    if (base === undefined) continue;
    s[k] = before !== undefined && before[k] === base ? mergedInto(base, v as Record<string, unknown>) : { ...base, ...v };
  }
}

function mergedInto(base: Record<string, unknown>, layer: Record<string, unknown>): Record<string, unknown> {
  const own = Object.keys(layer);
  for (let i = 0; i < own.length; i++) {
    const k = own[i];
    // A span id is whatever an agent sends: `__proto__` too, kept as a key like any other.
    if (k === '__proto__') Object.defineProperty(base, k, { value: layer[k], writable: true, enumerable: true, configurable: true });
    else base[k] = layer[k];
  }
  return base;
}
