import { varintSize, writeVarint } from '@neatroots/proto';
import { jsonText } from './wire';
import type { Envelope, RunEnd, RunStart, Span, Usage } from './types';

/**
 * The events topic's record, a v1.Envelope (proto/neatroots/v1/bus.proto), written straight
 * from an Envelope: the same bytes as encoding `envelopeToProto(env)` (@neatroots/messages)
 * with the generated encoder, without the message objects in between, the generated writer's
 * chunk per field, or a TextEncoder array per string: 1.3-2.5 us an item of the bench's fleet
 * against 2.8-8.2 (one process, a loaded machine). Ingest publishes every item it accepts so;
 * the property test in envelope-bytes.spec.ts holds the bytes to the generated encoder's.
 *
 * Protobuf as the generated encoder writes it: fields in number order, a proto3 string only
 * when not empty, an `optional` field whenever set, a double as 8 bytes little endian, every
 * length as the shortest varint. A record is written in one pass into a buffer kept between
 * calls (a nested message's body first, its length then put before it) and copied out.
 *
 * Undefined for an envelope outside what a validated item holds (a field of another type than
 * its declared one, a time that is not a number): the caller encodes that one the usual way.
 */
export function envelopeBytes(env: Envelope): Buffer | undefined {
  // Called again from within (a JSON value's toJSON): left to the caller's encoder.
  if (busy) return undefined;
  busy = true;
  at = 0;
  try {
    if (typeof env.project !== 'string' || typeof env.received_ms !== 'number') return undefined;
    str(10, env.project);
    if (env.received_ms !== 0) double(17, env.received_ms);
    const item = env.item;
    const kind = item?.kind;
    if (kind !== 'span' && kind !== 'run_start' && kind !== 'run_end') return undefined;
    const event = begin(26);
    let ok: boolean;
    if (kind === 'span') {
      const body = begin(10);
      ok = writeSpan((item as { span: Span }).span);
      end(body);
    } else if (kind === 'run_start') {
      const body = begin(18);
      ok = writeRunStart((item as { run: RunStart }).run);
      end(body);
    } else {
      const body = begin(26);
      ok = writeRunEnd((item as { run: RunEnd }).run);
      end(body);
    }
    if (!ok) return undefined;
    end(event);
    const out = Buffer.allocUnsafe(at);
    buf.copy(out, 0, 0, at);
    return out;
  } finally {
    busy = false;
    // A record of a large item does not keep its buffer's size.
    if (buf.length > KEEP_BYTES) buf = Buffer.allocUnsafeSlow(START_BYTES);
  }
}

const START_BYTES = 64 * 1024;
const KEEP_BYTES = 1 << 20;
let buf = Buffer.allocUnsafeSlow(START_BYTES);
let at = 0;
let busy = false;

/** Room for `n` more bytes. */
function room(n: number): void {
  if (at + n <= buf.length) return;
  const next = Buffer.allocUnsafeSlow(Math.max(at + n, buf.length * 2));
  buf.copy(next, 0, 0, at);
  buf = next;
}

function varint(n: number): void {
  at = writeVarint(buf, at, n);
}

/**
 * A string field, empty too (the callers leave out what the generated encoder does). A short
 * one (its UTF-8 at most 126 bytes: a length of one byte) is written in the same pass as its
 * length is found, ASCII by hand; a longer one measured first.
 */
function optStr(tag: number, s: string): void {
  const len = s.length;
  room(7 + 3 * len);
  varint(tag);
  if (len <= 42) {
    const lenAt = at++;
    let i = 0;
    for (; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[at + i] = c;
    }
    const n = i === len ? len : buf.write(s, at, 3 * len, 'utf8');
    buf[lenAt] = n;
    at += n;
  } else {
    const n = Buffer.byteLength(s, 'utf8');
    varint(n);
    at += buf.write(s, at, n, 'utf8');
  }
}

/** A proto3 string field: written when not empty. */
function str(tag: number, s: string): void {
  if (s !== '') optStr(tag, s);
}

function double(tag: number, v: number): void {
  room(9);
  buf[at++] = tag;
  at = buf.writeDoubleLE(v, at);
}

/** A nested message's tag, and a byte for its length; `end` puts the length there. */
function begin(tag: number): number {
  room(6);
  varint(tag);
  return at++;
}

/** The length of the message begun at `lenAt`: its body moved on when the length takes more than a byte. */
function end(lenAt: number): void {
  const n = at - lenAt - 1;
  const size = varintSize(n);
  if (size > 1) {
    room(size - 1);
    buf.copyWithin(lenAt + size, lenAt + 1, at);
    at += size - 1;
  }
  const body = at;
  at = lenAt;
  varint(n);
  at = body;
}

/** What spanToProto (wire.ts) makes of a field left out: the empty string; false when it is not a string then. */
function isStr(s: unknown): s is string | null | undefined {
  return s === undefined || s === null || typeof s === 'string';
}

function isDouble(v: unknown): v is number | undefined {
  return v === undefined || typeof v === 'number';
}

function writeSpan(s: Span): boolean {
  if (typeof s !== 'object' || s === null) return false;
  const { run_id, span_id, parent_id, type, name, tool, status, model, project, workflow, session_id, start_ms, end_ms, usage } = s;
  // run_id, span_id and type are written as they are (spanToProto gives them no default).
  if (typeof run_id !== 'string' || typeof span_id !== 'string' || typeof type !== 'string') return false;
  if (!isStr(parent_id) || !isStr(name) || !isStr(tool) || !isStr(status) || !isStr(model) || !isStr(project) || !isStr(workflow) || !isStr(session_id)) return false;
  if (!isDouble(start_ms) || !isDouble(end_ms)) return false;
  str(10, run_id);
  str(18, span_id);
  if (parent_id) optStr(26, parent_id);
  str(34, type);
  if (name) optStr(42, name);
  if (tool) optStr(50, tool);
  // spanToProto's order: input, output, then the attributes.
  const input = jsonText(s.input);
  if (input !== undefined) optStr(58, input);
  const output = jsonText(s.output);
  if (output !== undefined) optStr(66, output);
  if (typeof s.error === 'string') optStr(74, s.error);
  if (status) optStr(82, status);
  if (start_ms !== undefined) double(89, start_ms);
  if (end_ms !== undefined) double(97, end_ms);
  if (usage) {
    const u: Usage = usage;
    const { input_tokens, output_tokens, total_tokens, cost } = u;
    if (!isDouble(input_tokens) || !isDouble(output_tokens) || !isDouble(total_tokens) || !isDouble(cost)) return false;
    const m = begin(106);
    if (input_tokens !== undefined) double(9, input_tokens);
    if (output_tokens !== undefined) double(17, output_tokens);
    if (total_tokens !== undefined) double(25, total_tokens);
    if (cost !== undefined) double(33, cost);
    end(m);
  }
  if (model) optStr(114, model);
  if (project) optStr(122, project);
  if (workflow) optStr(130, workflow);
  if (session_id) optStr(138, session_id);
  if (s.attributes) {
    const attributes = jsonText(s.attributes);
    if (attributes !== undefined) optStr(146, attributes);
  }
  return true;
}

function writeRunStart(r: RunStart): boolean {
  if (typeof r !== 'object' || r === null) return false;
  const { run_id, project, workflow, session_id, system_prompt, user_message, tools, ts_ms } = r;
  if (typeof run_id !== 'string' || !isStr(project) || !isStr(workflow) || !isStr(session_id) || !isStr(system_prompt) || !isStr(user_message)) return false;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) return false;
  if (!isDouble(ts_ms)) return false;
  str(10, run_id);
  if (project) optStr(18, project);
  if (workflow) optStr(26, workflow);
  if (session_id) optStr(34, session_id);
  if (system_prompt) optStr(42, system_prompt);
  if (user_message) optStr(50, user_message);
  for (const t of tools ?? []) {
    if (typeof t !== 'object' || t === null) return false;
    const { name, description } = t;
    if (typeof name !== 'string' || !isStr(description)) return false;
    const m = begin(58);
    str(10, name);
    if (description) optStr(18, description);
    end(m);
  }
  if (ts_ms !== undefined) double(65, ts_ms);
  return true;
}

function writeRunEnd(r: RunEnd): boolean {
  if (typeof r !== 'object' || r === null) return false;
  const { run_id, status, ts_ms } = r;
  if (typeof run_id !== 'string' || typeof status !== 'string' || !isDouble(ts_ms)) return false;
  str(10, run_id);
  str(18, status);
  const out = jsonText(r.final_output);
  if (out !== undefined) optStr(26, out);
  if (ts_ms !== undefined) double(33, ts_ms);
  return true;
}
