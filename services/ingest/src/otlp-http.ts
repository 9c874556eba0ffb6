import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzip } from 'node:zlib';
import { promisify } from 'node:util';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { Metadata, status as Status } from '@grpc/grpc-js';
import { otlp } from '@neatroots/proto';
import { drainHttpServer, setPlainSecurityHeaders } from '@neatroots/ports';
import { decodeOtlpJson, encodeOtlpJsonResponse, MAX_VALUE_DEPTH, OtlpJsonError, type BadId } from './otlp-json';
import { retryStatus } from './pressure';

const gunzipAsync = promisify(gunzip);

/**
 * OTLP/HTTP trace export (`POST /v1/traces`), as the OpenTelemetry protocol specification
 * defines it: binary protobuf (`application/x-protobuf`) or OTLP/JSON (`application/json`),
 * optionally gzip-compressed; the answer in the request's encoding. The receiver only speaks
 * HTTP: a request's key is checked from its headers first (`checkKey`, the gRPC receiver's
 * check), so no body is read without a known key; then `exportTraces`, the same function the
 * gRPC receiver calls, so keys, back-pressure, mapping and limits are one code path whatever the
 * transport: it asks for the body (read, unpacked and decoded to the generated OTLP types) only
 * once back-pressure let the export in, so a refused export's body is neither read nor decoded.
 *
 * Status codes (the spec's, and what its exporters do with them):
 * 200 accepted (with partialSuccess when some spans were rejected); 400 a malformed body or
 * nothing acceptable (not retried, the reason in the body); 401 a missing or unknown key;
 * 413 a body over the size bound; 415 another content type or encoding; 429 back-pressure and
 * 503 unavailable, both with `Retry-After` (seconds), which exporters honour. The google.rpc.Status
 * in an error's body carries the gRPC code of the same refusal (413: RESOURCE_EXHAUSTED, as the
 * gRPC receiver answers a message over its bound; 405 and 415, which gRPC has no case of:
 * INVALID_ARGUMENT).
 */
export type OtlpOutcome =
  | { ok: true; response: otlp.ExportTraceServiceResponse }
  | { ok: false; code: Status; message: string };

/**
 * A request body that did or did not decode (the gRPC receiver's shape); `error` is the whole
 * message, `malformed ... request: ...`. `badIds`: OTLP/JSON spans refused for an id that is not
 * hex, by index, with the reason their rejection gives (otlp-json.ts spanId).
 */
export type DecodedRequest =
  | { ok: true; value: otlp.ExportTraceServiceRequest; badIds?: ReadonlyMap<number, BadId> }
  | { ok: false; error: string };

export interface OtlpHttpOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Largest body accepted, compressed or not, in bytes. */
  maxBodyBytes: number;
  /** Origins a browser may export from (`*` for any); none: no CORS headers, so browsers refuse. */
  corsOrigins?: string[];
  /** What Retry-After asks on 429 and 503. */
  retryAfterMs: number;
  /**
   * Checks the request's key (its headers as gRPC metadata) before the body is read: the
   * refusal, or nothing for a request to go on with. The same metadata goes to exportTraces.
   */
  checkKey(md: Metadata): Promise<{ code: Status; message: string } | undefined>;
  /**
   * The export: `read` reads, unpacks and decodes the body, asked for once back-pressure let it
   * in (never for a refusal); it throws the receiver's own refusals (a body over the bound, gzip
   * that does not inflate), which exportTraces lets through.
   */
  exportTraces(md: Metadata, read: () => Promise<DecodedRequest>): Promise<OtlpOutcome>;
  /**
   * Told of each request the receiver refuses itself, by the gRPC code its answer carries: a
   * path or method it does not serve, a content type or encoding it does not read, a body over
   * the bound or that does not inflate, an unexpected error (500: INTERNAL). Not of those
   * checkKey or exportTraces refused (they count their own), nor of a client that went away.
   */
  onRefused?(code: Status): void;
  /** `debug`, when given, hears of requests their client gave up on (a normal disconnect). */
  logger: { error(msg: string, err?: unknown): void; debug?(msg: string): void };
}

export interface OtlpHttpHandle {
  port: number;
  /** Stops accepting, lets requests in flight finish for up to graceMs, then cuts them. */
  close(graceMs: number): Promise<void>;
}

export const TRACES_PATH = '/v1/traces';
type Encoding = 'protobuf' | 'json';

const HTTP_STATUS: Partial<Record<Status, number>> = {
  [Status.INVALID_ARGUMENT]: 400,
  [Status.UNAUTHENTICATED]: 401,
  [Status.PERMISSION_DENIED]: 403,
  [Status.RESOURCE_EXHAUSTED]: 429,
  [Status.UNAVAILABLE]: 503,
};

class HttpError extends Error {
  /** Counted already where it was decided (checkKey). */
  counted = false;
  constructor(
    readonly httpStatus: number,
    readonly code: Status,
    message: string,
  ) {
    super(message);
  }
}

function contentTypeOf(req: IncomingMessage): Encoding {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/x-protobuf' || type === 'application/protobuf') return 'protobuf';
  if (type === 'application/json') return 'json';
  throw new HttpError(415, Status.INVALID_ARGUMENT, `content-type must be application/x-protobuf or application/json, got ${JSON.stringify(type || '(none)')}`);
}

async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (declared > max) throw new HttpError(413, Status.RESOURCE_EXHAUSTED, `body of ${declared} bytes is over the bound of ${max} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new HttpError(413, Status.RESOURCE_EXHAUSTED, `body is over the bound of ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Whether the body is gzip-compressed (else as it is); another encoding is refused, from the headers alone. */
function gzipped(req: IncomingMessage): boolean {
  const enc = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (enc === 'identity' || enc === '') return false;
  if (enc !== 'gzip') throw new HttpError(415, Status.INVALID_ARGUMENT, `content-encoding must be gzip or none, got ${JSON.stringify(enc)}`);
  return true;
}

async function inflate(raw: Buffer, gzip: boolean, max: number): Promise<Buffer> {
  if (!gzip) return raw;
  try {
    // maxOutputLength: a small gzip body must not unpack into gigabytes
    return await gunzipAsync(raw, { maxOutputLength: max });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new HttpError(413, Status.RESOURCE_EXHAUSTED, `gzip body unpacks to more than the bound of ${max} bytes`);
    }
    throw new HttpError(400, Status.INVALID_ARGUMENT, `gzip body does not decompress: ${(e as Error).message}`);
  }
}

/** What the generated decoders (ts-proto) nest at most: hard-coded, no generator option sets it. */
const GENERATED_MESSAGE_DEPTH = 100;
/**
 * Messages an OTLP protobuf request may nest. The deepest attribute value any configuration
 * takes a span's verdict on (MAX_VALUE_DEPTH kvlistValues, three messages each: AnyValue,
 * KeyValueList, KeyValue) under the deepest place an attribute sits (request, ResourceSpans,
 * ScopeSpans, Span, Span.Event, KeyValue), and the AnyValue at its bottom. Arrays cost two
 * messages a level, so they may nest further; the limit rejects their span all the same.
 */
const MAX_MESSAGE_DEPTH = 6 + 3 * MAX_VALUE_DEPTH + 1;

/**
 * An OTLP protobuf ExportTraceServiceRequest, with values nested as deep as over OTLP/JSON: the
 * generated decoders stop at 100 messages (an AnyValue 47 arrays deep, 32 kvlists), so such a
 * value would refuse the whole export rather than NEATROOTS_MAX_JSON_DEPTH its span alone. They
 * count the depth on the reader (`__tsProtoDecodeDepth`, from 0 when unset), so a reader that
 * starts it below 0 raises the bound for this decode only, nothing else in the process.
 */
export function decodeOtlpProtobuf(body: Uint8Array): otlp.ExportTraceServiceRequest {
  const reader = new BinaryReader(body);
  (reader as unknown as { __tsProtoDecodeDepth: number }).__tsProtoDecodeDepth = GENERATED_MESSAGE_DEPTH - MAX_MESSAGE_DEPTH;
  try {
    return otlp.ExportTraceServiceRequest.decode(reader);
  } catch (e) {
    if ((e as Error)?.message !== 'protobuf decode recursion limit exceeded') throw e;
    throw new Error(
      `messages are nested more than ${MAX_MESSAGE_DEPTH} deep: an attribute value nested past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)`,
    );
  }
}

function decode(body: Buffer, enc: Encoding): DecodedRequest {
  const badIds = new Map<number, BadId>();
  try {
    const value = enc === 'json' ? decodeOtlpJson(body.toString('utf8'), badIds) : decodeOtlpProtobuf(body);
    return badIds.size ? { ok: true, value, badIds } : { ok: true, value };
  } catch (e) {
    if (enc === 'json' && !(e instanceof OtlpJsonError)) throw e;
    return { ok: false, error: `malformed ${enc === 'json' ? 'OTLP/JSON' : 'protobuf'} request: ${(e as Error).message}` };
  }
}

/** The headers that carry the API key, as the gRPC receiver reads them. */
function metadataOf(req: IncomingMessage): Metadata {
  const md = new Metadata();
  for (const name of ['x-api-key', 'authorization']) {
    const v = req.headers[name];
    if (typeof v === 'string') md.set(name, v);
  }
  return md;
}

/** google.rpc.Status {code = 1, message = 2}: the body of an OTLP/HTTP error. */
function statusProto(code: number, message: string): Buffer {
  const varint = (n: number) => {
    const out: number[] = [];
    for (; n > 127; n = Math.floor(n / 128)) out.push((n & 127) | 128);
    out.push(n);
    return out;
  };
  const msg = Buffer.from(message);
  return Buffer.from([0x08, ...varint(code), 0x12, ...varint(msg.length), ...msg]);
}

export async function startOtlpHttp(opts: OtlpHttpOptions): Promise<OtlpHttpHandle> {
  const cors = opts.corsOrigins ?? [];
  const retryAfterSeconds = Math.max(1, Math.ceil(opts.retryAfterMs / 1000));

  function allowOrigin(req: IncomingMessage, res: ServerResponse): void {
    const origin = req.headers.origin;
    if (!origin || !(cors.includes('*') || cors.includes(origin))) return;
    res.setHeader('Access-Control-Allow-Origin', cors.includes('*') ? '*' : origin);
    res.setHeader('Vary', 'Origin');
    res.setHeader('Access-Control-Expose-Headers', 'Retry-After');
  }

  function send(res: ServerResponse, httpStatus: number, enc: Encoding, body: Buffer | string): void {
    // Closing: this connection's last answer (node closes it once sent), so a keep-alive client
    // goes elsewhere instead of being answered 503 on it until the cut.
    if (closing) res.setHeader('Connection', 'close');
    res.writeHead(httpStatus, { 'Content-Type': enc === 'json' ? 'application/json' : 'application/x-protobuf' });
    res.end(body);
  }

  function sendError(res: ServerResponse, enc: Encoding, httpStatus: number, code: Status, message: string): void {
    const retry = httpStatus === 429 || httpStatus === 503;
    if (retry) res.setHeader('Retry-After', String(retryAfterSeconds));
    if (enc === 'json') send(res, httpStatus, enc, JSON.stringify({ code, message }));
    else send(res, httpStatus, enc, retry ? retryStatus(code, message, opts.retryAfterMs) : statusProto(code, message));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // First: every answer carries them, a preflight's, a refusal's and an error's included.
    setPlainSecurityHeaders(res);
    allowOrigin(req, res);
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'OPTIONS') {
      // CORS preflight: what a browser exporter sends before its POST
      res.setHeader('Access-Control-Allow-Methods', 'POST');
      res.setHeader('Access-Control-Allow-Headers', 'content-type, content-encoding, x-api-key, authorization');
      res.setHeader('Access-Control-Max-Age', '600');
      if (closing) res.setHeader('Connection', 'close');
      res.writeHead(204).end();
      return;
    }
    let enc: Encoding = 'json';
    try {
      if (path !== TRACES_PATH) throw new HttpError(404, Status.NOT_FOUND, `no such endpoint ${JSON.stringify(path)}: trace export is POST ${TRACES_PATH}`);
      if (req.method !== 'POST') {
        res.setHeader('Allow', 'POST');
        throw new HttpError(405, Status.INVALID_ARGUMENT, `${TRACES_PATH} takes POST, not ${req.method}`);
      }
      enc = contentTypeOf(req);
      // No body is read, unpacked or decoded for a request without a known key.
      const md = metadataOf(req);
      const refused = await opts.checkKey(md);
      if (refused) throw Object.assign(new HttpError(HTTP_STATUS[refused.code] ?? 500, refused.code, refused.message), { counted: true });
      const gzip = gzipped(req);
      const encoding = enc;
      // The body is read only if back-pressure lets the export in. Refused, it is left unread:
      // node discards it as it comes once the answer is sent (nothing kept), so the client, done
      // sending, reads its 429 and Retry-After on a connection that stays open.
      const outcome = await opts.exportTraces(md, async () => decode(await inflate(await readBody(req, opts.maxBodyBytes), gzip, opts.maxBodyBytes), encoding));
      if (outcome.ok) {
        send(res, 200, enc, enc === 'json' ? encodeOtlpJsonResponse(outcome.response) : Buffer.from(otlp.ExportTraceServiceResponse.encode(outcome.response).finish()));
      } else {
        sendError(res, enc, HTTP_STATUS[outcome.code] ?? 500, outcome.code, outcome.message);
      }
    } catch (e) {
      // The client went away before its body was all sent (it aborted, its connection broke): a
      // normal disconnect, not ingest's error, and there is nobody to answer.
      if (!req.complete && (req.destroyed || req.socket?.destroyed)) {
        opts.logger.debug?.(`ingest: OTLP/HTTP: the client went away before its request's body was all sent (${(e as Error)?.message ?? String(e)}); nothing taken`);
        res.destroy();
        return;
      }
      if (e instanceof HttpError) {
        if (!e.counted) opts.onRefused?.(e.code);
        // The rest of a refused body is not read: close the connection rather than drain it.
        if (!req.complete) res.setHeader('Connection', 'close');
        sendError(res, enc, e.httpStatus, e.code, e.message);
        return;
      }
      opts.logger.error('ingest: OTLP/HTTP: unexpected error', e);
      opts.onRefused?.(Status.INTERNAL);
      sendError(res, enc, 500, Status.INTERNAL, (e as Error)?.message ?? String(e));
    }
  }

  /** close() began: every answer from now on closes its connection. */
  let closing = false;
  const server: Server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  let closed: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    close(graceMs) {
      closing = true;
      closed ??= drainHttpServer(server, graceMs);
      return closed;
    },
  };
}
