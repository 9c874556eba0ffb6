import { SpanValidationError } from './errors';
import type { LimitCheck } from './limits';
import { normalizeItem } from './normalize';
import type { StreamItem } from './types';

/** A JSON Lines line that could not be read, with where it was. */
export class JsonlError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly reason: string,
  ) {
    super(`${file}:${line}: ${reason}`);
    this.name = 'JsonlError';
  }
}

/**
 * Parses one line of a span file; blank lines give undefined. Anything wrong is a JsonlError
 * naming the file, the line and the field; with `limits` the item is held to them too.
 */
export function parseJsonlLine(text: string, file: string, line: number, limits?: LimitCheck): StreamItem | undefined {
  const trimmed = text.trim();
  if (!trimmed) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(trimmed);
  } catch (e) {
    throw new JsonlError(file, line, `invalid JSON (${(e as Error).message})`);
  }
  try {
    return normalizeItem(raw, limits);
  } catch (e) {
    if (e instanceof SpanValidationError) throw new JsonlError(file, line, e.message);
    throw e;
  }
}

export function parseJsonl(text: string, file = '<input>', limits?: LimitCheck): StreamItem[] {
  const out: StreamItem[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const item = parseJsonlLine(lines[i], file, i + 1, limits);
    if (item) out.push(item);
  }
  return out;
}
