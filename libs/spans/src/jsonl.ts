import { SpanValidationError } from './errors';
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

/** Parses one line of a span file; blank lines give undefined. */
export function parseJsonlLine(text: string, file: string, line: number): StreamItem | undefined {
  const trimmed = text.trim();
  if (!trimmed) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(trimmed);
  } catch (e) {
    throw new JsonlError(file, line, `invalid JSON (${(e as Error).message})`);
  }
  try {
    return normalizeItem(raw);
  } catch (e) {
    if (e instanceof SpanValidationError) throw new JsonlError(file, line, e.message);
    throw e;
  }
}

export function parseJsonl(text: string, file = '<input>'): StreamItem[] {
  const out: StreamItem[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const item = parseJsonlLine(lines[i], file, i + 1);
    if (item) out.push(item);
  }
  return out;
}
