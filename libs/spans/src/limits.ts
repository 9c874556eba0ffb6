import { SpanValidationError } from './errors';
import type { RunEnd, RunStart, Span, StreamItem } from './types';

/**
 * What ingest accepts, beyond the shape of the contract: an item past these bounds is refused
 * with the field at fault, so that nothing acknowledged can later fail to be stored or read
 * (a tool-arguments string nested thousands deep overflows every recursive reader down the
 * line; 1e300 tokens or a start in the year 2554 do not fit the store's columns).
 * Configured by the NEATROOTS_MAX_* variables (libs/platform config); docs/operations.md.
 */
export interface SpanLimits {
  /** Deepest nesting of one JSON value (input, output, an attribute, final_output). */
  maxJsonDepth: number;
  /** Attributes of one span. */
  maxAttributes: number;
  /** Largest attribute value, in characters of its JSON. */
  maxAttributeChars: number;
  /** Largest item, all its values together, in characters of its JSON. */
  maxItemChars: number;
  /** Largest token count of one span (input, output or total). */
  maxTokens: number;
  /** How far past the receiver's clock a timestamp may be (clock skew). */
  maxFutureMs: number;
}

/** Generous bounds: no agent framework we know of comes near them in normal use. */
export const DEFAULT_SPAN_LIMITS: SpanLimits = {
  maxJsonDepth: 64,
  maxAttributes: 1_000,
  maxAttributeChars: 1024 * 1024,
  maxItemChars: 4 * 1024 * 1024,
  maxTokens: 1_000_000_000,
  maxFutureMs: 24 * 60 * 60_000,
};

/** Limits and the receiver's clock, as ingest passes them to the parsers. */
export interface LimitCheck {
  limits: SpanLimits;
  /** Epoch ms now (the upper end of the timestamp window is now + maxFutureMs). */
  now: number;
}

/** The variable that sets each limit, quoted in rejections so an operator knows what to change. */
export const LIMIT_VARIABLES: Record<keyof SpanLimits, string> = {
  maxJsonDepth: 'NEATROOTS_MAX_JSON_DEPTH',
  maxAttributes: 'NEATROOTS_MAX_ATTRIBUTES',
  maxAttributeChars: 'NEATROOTS_MAX_ATTRIBUTE_CHARS',
  maxItemChars: 'NEATROOTS_MAX_ITEM_CHARS',
  maxTokens: 'NEATROOTS_MAX_TOKENS',
  maxFutureMs: 'NEATROOTS_MAX_FUTURE_MS',
};

interface Measure {
  /** Characters of the value's JSON, approximately (numbers count as 8); stops past the budget. */
  chars: number;
  /** Nesting went past the limit. */
  tooDeep: boolean;
}

/** What jsonSize answers for a value nested past the limit. */
const TOO_DEEP = -1;
/** How deep jsonSize recurses before it walks the rest with an explicit stack (measureDeep). */
const RECURSE_DEPTH = 48;

/**
 * Size and depth of a JSON value. Stops as soon as either bound is passed. Values nested
 * deeper than the stack allows are measured without recursing.
 */
export function measureJson(value: unknown, maxDepth: number, maxChars: number): Measure {
  const chars = jsonSize(value, 0, maxDepth, maxChars);
  return chars === TOO_DEEP ? { chars: 0, tooDeep: true } : { chars, tooDeep: false };
}

/**
 * The characters measureJson counts for `v` at `depth` (past `maxChars` it stops, with a count
 * above it), or TOO_DEEP. On ingest's hot path (every span's input, output and attributes): it
 * recurses while shallow, allocating nothing (the stack walk allocated its two arrays, a result
 * and each object's key list: a few percent of the embedded pipeline's allocation), and hands a
 * subtree RECURSE_DEPTH levels down to measureDeep, which cannot overflow the stack.
 */
function jsonSize(v: unknown, depth: number, maxDepth: number, maxChars: number): number {
  if (typeof v === 'string') return v.length + 2;
  if (v === null || typeof v !== 'object') return 8;
  if (depth >= maxDepth) return TOO_DEEP;
  if (depth >= RECURSE_DEPTH) {
    const m = measureDeep(v, maxDepth - depth, maxChars);
    return m.tooDeep ? TOO_DEEP : m.chars;
  }
  // As measureDeep counts: a container's own characters (brackets, separators, keys) first.
  let chars: number;
  if (Array.isArray(v)) {
    chars = 2 + v.length;
    if (chars > maxChars) return chars;
    for (let i = 0; i < v.length; i++) {
      const c = jsonSize(v[i], depth + 1, maxDepth, maxChars - chars);
      if (c === TOO_DEEP) return c;
      chars += c;
      if (chars > maxChars) return chars;
    }
    return chars;
  }
  const o = v as Record<string, unknown>;
  chars = 2;
  for (const k in o) if (Object.prototype.hasOwnProperty.call(o, k)) chars += k.length + 4;
  if (chars > maxChars) return chars;
  for (const k in o) {
    if (!Object.prototype.hasOwnProperty.call(o, k)) continue;
    const c = jsonSize(o[k], depth + 1, maxDepth, maxChars - chars);
    if (c === TOO_DEEP) return c;
    chars += c;
    if (chars > maxChars) return chars;
  }
  return chars;
}

/**
 * measureJson with an explicit stack: a recursive walk would itself overflow on the values
 * this exists to refuse.
 */
export function measureDeep(value: unknown, maxDepth: number, maxChars: number): Measure {
  if (typeof value === 'string') return { chars: value.length + 2, tooDeep: false };
  if (value === null || typeof value !== 'object') return { chars: 8, tooDeep: false };
  let chars = 0;
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length) {
    const v = values.pop();
    const depth = depths.pop() as number;
    if (typeof v === 'string') chars += v.length + 2;
    else if (v === null || typeof v !== 'object') chars += 8;
    else {
      if (depth >= maxDepth) return { chars, tooDeep: true };
      if (Array.isArray(v)) {
        chars += 2 + v.length;
        for (let i = v.length - 1; i >= 0; i--) {
          values.push(v[i]);
          depths.push(depth + 1);
        }
      } else {
        chars += 2;
        const o = v as Record<string, unknown>;
        const keys = Object.keys(o);
        for (const k of keys) chars += k.length + 4;
        for (let i = keys.length - 1; i >= 0; i--) {
          values.push(o[keys[i]]);
          depths.push(depth + 1);
        }
      }
    }
    if (chars > maxChars) return { chars, tooDeep: false };
  }
  return { chars, tooDeep: false };
}

/** Counts an item's values against its size budget and refuses a value nested too deep. */
class Budget {
  chars = 0;
  constructor(
    private readonly limits: SpanLimits,
    private readonly runId: string,
    private readonly spanId?: string,
  ) {}

  fail(field: string, reason: string, limit: keyof SpanLimits): never {
    throw new SpanValidationError(field, `${reason} (${LIMIT_VARIABLES[limit]})`, this.runId, this.spanId);
  }

  /** Adds one value; returns its size. */
  add(field: string, v: unknown): number {
    if (v === undefined) return 0;
    const chars = jsonSize(v, 0, this.limits.maxJsonDepth, this.limits.maxItemChars - this.chars);
    if (chars === TOO_DEEP) this.fail(field, `is JSON nested more than ${this.limits.maxJsonDepth} levels deep`, 'maxJsonDepth');
    this.chars += chars;
    if (this.chars > this.limits.maxItemChars) {
      this.fail(field, `makes the item larger than ${this.limits.maxItemChars} characters`, 'maxItemChars');
    }
    return chars;
  }
}

function checkTime(b: Budget, field: string, ms: number | undefined, c: LimitCheck): void {
  if (ms === undefined) return;
  if (ms > c.now + c.limits.maxFutureMs) {
    // Date stops at the year 275760; past it there is no date to show.
    const when = ms <= 8.64e15 ? new Date(ms).toISOString() : 'beyond any date';
    b.fail(field, `is ${ms} (${when}), more than ${c.limits.maxFutureMs} ms ahead of the receiver's clock`, 'maxFutureMs');
  }
}

function checkSpan(s: Span, c: LimitCheck): void {
  const { limits } = c;
  const b = new Budget(limits, s.run_id, s.span_id);
  for (const k of ['name', 'tool', 'error', 'model'] as const) b.add(k, s[k]);
  b.add('input', s.input);
  b.add('output', s.output);
  if (s.attributes) {
    const keys = Object.keys(s.attributes);
    if (keys.length > limits.maxAttributes) {
      b.fail('attributes', `has ${keys.length} attributes, more than ${limits.maxAttributes}`, 'maxAttributes');
    }
    for (const k of keys) {
      const size = b.add(`attributes.${k}`, s.attributes[k]) + k.length;
      if (size > limits.maxAttributeChars) {
        b.fail(`attributes.${k}`, `is ${size} characters, more than ${limits.maxAttributeChars}`, 'maxAttributeChars');
      }
    }
  }
  checkTime(b, 'start_ms', s.start_ms, c);
  checkTime(b, 'end_ms', s.end_ms, c);
  if (s.usage) {
    for (const k of ['input_tokens', 'output_tokens', 'total_tokens'] as const) {
      const v = s.usage[k];
      if (v !== undefined && v > limits.maxTokens) b.fail(`usage.${k}`, `is ${v}, more than ${limits.maxTokens} tokens`, 'maxTokens');
    }
  }
}

function checkRunStart(r: RunStart, c: LimitCheck): void {
  const b = new Budget(c.limits, r.run_id);
  b.add('system_prompt', r.system_prompt);
  b.add('user_message', r.user_message);
  b.add('tools', r.tools);
  checkTime(b, 'ts_ms', r.ts_ms, c);
}

function checkRunEnd(r: RunEnd, c: LimitCheck): void {
  const b = new Budget(c.limits, r.run_id);
  b.add('final_output', r.final_output);
  checkTime(b, 'ts_ms', r.ts_ms, c);
}

/** Refuses an item past the limits, with a SpanValidationError naming the field and the variable. */
export function checkItemLimits(item: StreamItem, c: LimitCheck): void {
  if (item.kind === 'span') checkSpan(item.span, c);
  else if (item.kind === 'run_start') checkRunStart(item.run, c);
  else checkRunEnd(item.run, c);
}
