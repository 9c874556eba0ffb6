/**
 * A session (the sopops format): the conversation's turns and the tools called, as posted to
 * POST /v1/workspaces/{ws}/sessions or given to `sopops check`. parseSession is the one
 * validator; past it the checker trusts the shape.
 */
export interface Turn {
  role: 'user' | 'agent';
  text: string;
}

export interface ToolCall {
  /** The turn it belongs to, an index into turns. */
  turn: number;
  tool: string;
  input: unknown;
  output: unknown;
  error: unknown;
}

export interface Session {
  external_id: string | null;
  agent: string | null;
  /** null: the release that is live. */
  release_id: string | null;
  started_at: string | null;
  transcript_ref: string | null;
  turns: Turn[];
  tool_calls: ToolCall[];
}

export class SessionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SessionError';
  }
}

const KEYS = ['external_id', 'agent', 'release_id', 'started_at', 'transcript_ref', 'turns', 'tool_calls'];
const TOOL_CALL_KEYS = ['turn', 'tool', 'input', 'output', 'error'];

/** Validates a parsed JSON value; a SessionError names the field (`turns[3].role: ...`). */
export function parseSession(value: unknown): Session {
  const o = obj(value, 'the session');
  unknownKeys(o, KEYS, '');
  const optString = (k: string): string | null => {
    const v = o[k];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') throw new SessionError(`${k}: expected a string or null, got ${typeName(v)}`);
    return v;
  };
  if (!Array.isArray(o.turns)) throw new SessionError(`turns: expected a list of {role, text}, got ${typeName(o.turns)}`);
  const turns: Turn[] = o.turns.map((t, i) => {
    const to = obj(t, `turns[${i}]`);
    unknownKeys(to, ['role', 'text'], `turns[${i}].`);
    if (to.role !== 'user' && to.role !== 'agent') throw new SessionError(`turns[${i}].role: expected "user" or "agent", got ${shown(to.role)}`);
    if (typeof to.text !== 'string') throw new SessionError(`turns[${i}].text: expected a string, got ${typeName(to.text)}`);
    return { role: to.role, text: to.text };
  });
  const rawCalls = o.tool_calls ?? [];
  if (!Array.isArray(rawCalls)) throw new SessionError(`tool_calls: expected a list, got ${typeName(rawCalls)}`);
  const tool_calls: ToolCall[] = rawCalls.map((c, i) => {
    const co = obj(c, `tool_calls[${i}]`);
    unknownKeys(co, TOOL_CALL_KEYS, `tool_calls[${i}].`);
    if (!Number.isInteger(co.turn) || (co.turn as number) < 0 || (co.turn as number) >= turns.length) {
      throw new SessionError(`tool_calls[${i}].turn: expected the index of one of the ${turns.length} turns, got ${shown(co.turn)}`);
    }
    if (typeof co.tool !== 'string' || !co.tool) throw new SessionError(`tool_calls[${i}].tool: expected a tool name, got ${typeName(co.tool)}`);
    return { turn: co.turn as number, tool: co.tool, input: co.input ?? null, output: co.output ?? null, error: co.error ?? null };
  });
  return {
    external_id: optString('external_id'),
    agent: optString('agent'),
    release_id: releaseRef(o.release_id),
    started_at: timestamp(optString('started_at'), 'started_at'),
    transcript_ref: optString('transcript_ref'),
    turns,
    tool_calls,
  };
}

/**
 * release_id: a release's id, or its number as the API writes release numbers (a JSON number,
 * or the same as a string); null or left out for the release that is live.
 */
function releaseRef(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 999_999_999) return String(v);
  throw new SessionError(`release_id: expected a release's id, its number or null, got ${typeName(v)}`);
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|([+-])(\d{2}):(\d{2}))$/i;

/**
 * The points in time the store keeps and reads back: years 100 to 9999, in UTC (the database
 * has no year 0, and PGlite, the embedded default's database, reads a year before 100 back as 19xx).
 */
const EARLIEST = Date.parse('0100-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59Z');

/**
 * An ISO 8601 date and time with its offset (`2026-11-30T10:00:00Z`, `...+02:00`): what the
 * store keeps as a point in time. Anything else, a date that does not exist (February 30, year
 * 0000) or a point outside years 100 to 9999 once its offset is applied included, is refused
 * here rather than by the database.
 */
function timestamp(v: string | null, field: string): string | null {
  if (v === null) return null;
  const m = ISO_TIME.exec(v);
  const bad = () => new SessionError(`${field}: expected an ISO 8601 date and time with its offset, such as "2026-11-30T10:00:00Z", got ${shown(v)}`);
  if (!m) throw bad();
  const [year, month, day, hour, minute, second = 0] = m.slice(1, 7).map((x) => (x === undefined ? undefined : Number(x)));
  const [sign, offHour = 0, offMinute = 0] = [m[7], ...m.slice(8).map((x) => (x === undefined ? undefined : Number(x)))] as [string | undefined, number?, number?];
  // the days of the month, in a leap year when the year is one (2000 stands in for years Date.UTC would read as 19xx)
  const leap = (year! % 4 === 0 && year! % 100 !== 0) || year! % 400 === 0;
  const days = new Date(Date.UTC(leap ? 2000 : 2001, month!, 0)).getUTCDate();
  if (year! < 1 || month! < 1 || month! > 12 || day! < 1 || day! > days || hour! > 23 || minute! > 59 || second! > 59 || offHour > 23 || offMinute > 59) throw bad();
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const local = Date.parse(`${pad(year!, 4)}-${pad(month!)}-${pad(day!)}T${pad(hour!)}:${pad(minute!)}:${pad(second)}Z`);
  const utc = local - (sign === '-' ? -1 : 1) * (offHour * 60 + offMinute) * 60_000;
  if (utc < EARLIEST || utc > LATEST) throw bad();
  return v;
}

function obj(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new SessionError(`${what}: expected an object, got ${typeName(v)}`);
  return v as Record<string, unknown>;
}

function unknownKeys(o: Record<string, unknown>, keys: string[], prefix: string): void {
  const extra = Object.keys(o).filter((k) => !keys.includes(k));
  if (extra.length) throw new SessionError(`${prefix}${clip(extra[0])}: unknown field (known: ${keys.join(', ')})`);
}

/**
 * A refused value as the message quotes it: JSON, cut at SHOWN_MAX characters. A session may be
 * megabytes, and between services the message travels in a header (past HTTP/2's 64 KiB the
 * call never ended, and the api answered 504).
 */
const SHOWN_MAX = 100;

function clip(text: string): string {
  return text.length > SHOWN_MAX ? `${text.slice(0, SHOWN_MAX - 1)}…` : text;
}

function shown(v: unknown): string {
  return clip(JSON.stringify(v) ?? String(v));
}

function typeName(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  return typeof v === 'object' ? 'an object' : `${typeof v} ${shown(v)}`;
}

/** Whether the agent said anything at all: a session where it never spoke is not measurable. */
export function agentSpoke(s: Session): boolean {
  return s.turns.some((t) => t.role === 'agent' && t.text.trim() !== '');
}
