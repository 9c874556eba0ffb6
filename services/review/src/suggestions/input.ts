import { SopError } from '@neatroots/store';

const MAX_TEXT = 10_000;

/** A body of only these optional text fields ({} when absent), else 400 naming the field. */
export function textFields<K extends string>(raw: unknown, fields: readonly K[]): Partial<Record<K, string>> {
  if (raw === undefined || raw === null || raw === '') return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new SopError(400, 'invalid_body', `the body must be a JSON object with ${fields.join(', ')} (all optional)`);
  const b = raw as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !(fields as readonly string[]).includes(k));
  if (unknown.length) throw new SopError(400, 'invalid_body', `unknown field ${unknown.join(', ')} in the body; it takes ${fields.join(', ')}`);
  const out: Partial<Record<K, string>> = {};
  for (const k of fields) {
    const v = b[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw new SopError(400, 'invalid_body', `${k} must be a string`);
    if (v.length > MAX_TEXT) throw new SopError(400, 'invalid_body', `${k} is longer than ${MAX_TEXT} characters`);
    out[k] = v;
  }
  return out;
}
