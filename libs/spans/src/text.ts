/**
 * The text of a span that `match` and questions read: strings as they are, anything else
 * as JSON, and an MCP tool result's content[].text items read like plain output.
 */
export const MAX_TEXT_CHARS = 200_000;

function mcpText(v: unknown): string | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const content = (v as { content?: unknown }).content;
  if (!Array.isArray(content)) return undefined;
  const parts: string[] = [];
  for (const c of content) {
    if (c && typeof c === 'object' && typeof (c as { text?: unknown }).text === 'string') parts.push((c as { text: string }).text);
  }
  return parts.length ? parts.join('\n') : undefined;
}

/** Text of one JSON value, at most `limit` characters. */
export function valueText(v: unknown, limit = MAX_TEXT_CHARS): string {
  if (v === undefined || v === null) return '';
  let s: string;
  if (typeof v === 'string') s = v;
  else s = mcpText(v) ?? safeStringify(v);
  return s.length > limit ? s.slice(0, limit) : s;
}

function safeStringify(v: unknown): string {
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return String(v);
  }
}

/** A stable string for comparing arguments (`same: [input]`): object keys sorted. */
export function canonicalJson(v: unknown): string {
  if (v === undefined) return '';
  if (v === null || typeof v !== 'object') return primitiveJson(v);
  // Called for every span a `repeat` check compares: plain loops, no intermediate arrays.
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i ? ',' : '') + (v[i] === undefined ? 'null' : canonicalJson(v[i]));
    return `${out}]`;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length > 1) sortKeys(keys);
  let out = '{';
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const val = o[k];
    if (val === undefined) continue;
    out += `${first ? '' : ','}${stringJson(k)}:${canonicalJson(val)}`;
    first = false;
  }
  return `${out}}`;
}

/** What JSON.stringify escapes in a string: quotes, backslashes, control characters, lone surrogates (any surrogate here: the pairs go to JSON.stringify too). */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * JSON.stringify's text of a string, quoted without a call into it when nothing needs escaping
 * (object keys and short argument values almost always): about half its cost a string.
 */
function stringJson(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/**
 * JSON.stringify's text of a value that is not an object ('' for what it leaves out). A finite
 * number's JSON is its string (ECMA-262 SerializeJSONProperty), -0 included: String() is about
 * a seventh of the cost of the call.
 */
function primitiveJson(v: unknown): string {
  if (typeof v === 'string') return stringJson(v);
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return JSON.stringify(v) ?? '';
}

/**
 * Sorts an object's keys in place, as `keys.sort()` would (UTF-16 code units). An insertion sort
 * up to 32 keys: Array#sort allocated work arrays on each call, the largest share (about a fifth)
 * of the rule engine's allocation over the bench fleet, whose arguments have two keys.
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 32) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i];
    let j = i - 1;
    while (j >= 0 && keys[j] > k) {
      keys[j + 1] = keys[j];
      j--;
    }
    keys[j + 1] = k;
  }
}
