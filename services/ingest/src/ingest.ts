import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  Metadata,
  Server,
  ServerInterceptingCall,
  status as Status,
  type MethodDefinition,
  type ServerInterceptor,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { RepeatedErrors, type Bus, type LogFields, type Logger, type Subscription, type Topic } from '@neatroots/ports';
import { bindGrpc, closeGrpcServer, otlp, v1 } from '@neatroots/proto';
import { makeTopics, type Note, type Topics } from '@neatroots/messages';
import {
  DEFAULT_SPAN_LIMITS,
  MAX_ID_LENGTH,
  envelopeBytes,
  itemRunId,
  mapEvents,
  mapOtlpExport,
  type Envelope,
  type LimitCheck,
  type MapResult,
  type Rejection,
  type Span,
  type SpanLimits,
  type StreamItem,
} from '@neatroots/spans';
import { apiKeyFrom, grantOf, PROJECT_STREAM_REFUSED, type KeyGrant, type ResolveKey } from './auth';
import { inc, newMetrics, type IngestMetrics } from './metrics';
import { NoteHub, type NoteHubOptions } from './notes';
import { decodeOtlpProtobuf, startOtlpHttp, type DecodedRequest, type OtlpHttpHandle, type OtlpOutcome } from './otlp-http';
import { Pressure, type PressureOptions } from './pressure';

/**
 * The ingest service: OTLP/gRPC trace export (what OpenTelemetry SDKs send, unchanged) and the
 * neatroots.v1 Ingest API (Export, and Subscribe for notes and halts), on grpc-js directly.
 *
 * The one promise it makes: an item is acknowledged only once it is on the bus. Accepted items
 * are published (topic events, key run_id) before the response is sent; if publishing fails
 * the call fails with UNAVAILABLE, which every OTLP exporter and the SDK retry, so nothing
 * acknowledged is lost. An item the bus refuses as too large for one record is the exception:
 * sending it again would fail alike forever, so it alone is rejected and the others are taken. A retried export may publish an item twice; the rule engine treats two
 * copies of a span as one (CONTRACTS.md section 1).
 */
export interface IngestOptions {
  bus: Bus;
  /**
   * API key → its project and scope, or the project's name alone for a full key (undefined:
   * unknown key → UNAUTHENTICATED). A key of scope `ingest` may not open a Subscribe stream of
   * the whole project (PERMISSION_DENIED).
   */
  resolveKey: ResolveKey;
  /** OTLP/gRPC port. Default 4317, the OTLP standard; 0 picks a free one. */
  otlpPort?: number;
  /**
   * neatroots.v1 Ingest port. Default 50051, the customary gRPC port (4318 is OTLP/HTTP's, so
   * it is left alone for a collector or a later OTLP/HTTP endpoint); 0 picks a free one.
   * When it equals otlpPort both services share one server.
   */
  grpcPort?: number;
  /**
   * OTLP/HTTP port (`POST /v1/traces`, protobuf and JSON). The configuration's default is
   * 4318, the OTLP standard; here undefined starts no HTTP receiver; 0 picks a free port.
   */
  otlpHttpPort?: number;
  /** Origins browser agents may export from over OTLP/HTTP (`*` for any). Default none. */
  otlpHttpCorsOrigins?: string[];
  /** Interface to listen on. Default 127.0.0.1 (as NEATROOTS_HOST); 0.0.0.0 in a container. */
  host?: string;
  /** Largest request accepted, bytes (grpc.max_receive_message_length). Default 8 MiB. */
  maxReceiveMessageBytes?: number;
  /**
   * How often a connection with no traffic is pinged (grpc.keepalive_time_ms), and how long a
   * ping may go unanswered before the connection is dropped with its calls. A client gone
   * without closing its connection (a pod killed, a NAT or load balancer forgetting it) otherwise
   * keeps its Subscribe streams, and their notes, for the weeks TCP takes to notice. Default
   * 60 s and 20 s.
   */
  keepalive?: { everyMs: number; timeoutMs: number };
  /** What an item may hold (depth, sizes, tokens, timestamps); past them it is rejected. Default DEFAULT_SPAN_LIMITS. */
  limits?: SpanLimits;
  /**
   * Bus topics (default prefix `neatroots`). The events topic's records (v1.Envelope) are
   * written by envelopeBytes (@neatroots/spans), the same bytes as its codec's, faster; what
   * that leaves out (an item with a field of another type) goes through `topics.events.encode`.
   */
  topics?: Topics;
  /** Names this replica's notes consumer group (`ingest-notes-<id>`). Default host-pid-random. */
  replicaId?: string;
  notes?: Omit<NoteHubOptions, 'now' | 'onDropped'>;
  /** Back-pressure: exports are refused (RESOURCE_EXHAUSTED) past the backlog bound or the memory ceiling. Default none. */
  pressure?: PressureOptions;
  /** How long close() waits for in-flight calls before cutting them. Default 5 s. */
  shutdownGraceMs?: number;
  /**
   * How often each open Subscribe stream's key is looked up again (through resolveKey, so its
   * cache; at most KEY_RECHECK_CONCURRENCY keys at a time): a stream whose key is now unknown,
   * or opens another project, is ended with UNAUTHENTICATED; a stream of the whole project whose
   * key is now of scope ingest, with PERMISSION_DENIED. Default 60 s.
   */
  keyRecheckMs?: number;
  now?: () => number;
  /** Lines about a run carry its `project` and `run_id`; `debug`, when given, hears of normal disconnects. Default console. */
  logger?: Pick<Logger, 'warn' | 'error'> & Partial<Pick<Logger, 'debug'>>;
  /**
   * Pre-call checks (PreCheck, PreCheckPolicy): the rule engine (of this process, or over gRPC
   * in the distributed deployment), and each project's fail mode. Absent: they answer
   * UNAVAILABLE, and the SDK follows its fail mode.
   */
  precheck?: PrecheckPort;
}

/** What ingest asks of the rule engine for a pre-call check. */
export interface PrecheckPort {
  /** `deadline` (epoch ms): when the caller stops waiting; `signal`: aborted when it gave up before that. */
  precheck(req: { project: string; span: Span; knownSpans?: number; timeoutMs?: number; deadline?: number; signal?: AbortSignal }): Promise<{ decision: 'allow' | 'halt'; check_id?: string; finding_id?: string; title?: string; text?: string }>;
  haltingTools(project: string, workflow?: string): string[] | Promise<string[]>;
  /** The project's fail mode: true for fail-closed. */
  failClosed(project: string): boolean;
  timeoutMs: number;
  /** The engine's "did not see the exported spans in time". */
  isTimeout(err: unknown): boolean;
  /** The engine could not be reached (a rule engine in another process). */
  isUnavailable?(err: unknown): boolean;
}

export interface IngestHandle {
  otlpPort: number;
  grpcPort: number;
  /** The OTLP/HTTP port, when one was asked for. */
  otlpHttpPort?: number;
  metrics: IngestMetrics;
  /** Stops accepting calls, ends Subscribe streams, lets in-flight exports finish, leaves the notes group. */
  close(): Promise<void>;
}

export const DEFAULT_OTLP_PORT = 4317;
export const DEFAULT_GRPC_PORT = 50051;
export const DEFAULT_MAX_RECEIVE_BYTES = 8 * 1024 * 1024;
/** Reasons quoted in one error message; the rest are counted. */
const MAX_QUOTED_REASONS = 20;
/**
 * How many keys a round of the open streams' key check looks up at once, so that lookups that
 * hang (the review service unreachable: up to 10 s each) hold up a round of N keys for N / 8 of
 * those waits, not N.
 */
export const KEY_RECHECK_CONCURRENCY = 8;

/** A request body that did or did not decode; `error` is the whole message (`malformed ... request: ...`). */
type Decoded<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * grpc-js answers a request its deserializer throws on with INTERNAL; a body that is not valid
 * protobuf is the client's mistake, so the decode error is carried to the handler, which
 * answers INVALID_ARGUMENT.
 */
function safeDecoder<T>(decode: (b: Buffer) => T): (b: Buffer) => Decoded<T> {
  return (b) => {
    try {
      return { ok: true, value: decode(b) };
    } catch (e) {
      return { ok: false, error: `malformed protobuf request: ${(e as Error).message}` };
    }
  };
}

function withSafeDecoder<Req, Res>(m: MethodDefinition<Req, Res>): MethodDefinition<Decoded<Req>, Res> {
  return {
    ...m,
    requestSerialize: (v: Decoded<Req>) => {
      if (!v.ok) throw new Error('cannot serialize a failed decode');
      return m.requestSerialize(v.value);
    },
    requestDeserialize: safeDecoder(m.requestDeserialize),
  };
}

/**
 * A method whose message grpc-js hands over as it came, its bytes (the export methods). grpc-js
 * decodes a call's message before the handler runs; an export's is decoded only once
 * back-pressure has let it in, so an export refused costs no decode. Under a flood of clients
 * that retry at once the refused exports outnumber the accepted 15 to 30 to one: each decoded
 * into garbage took the resident memory past the ceiling meant to bound it.
 */
function withRawBytes<Req, Res>(m: MethodDefinition<Req, Res>): MethodDefinition<Buffer, Res> {
  return { ...m, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b };
}

// Values nested as deep as OTLP/HTTP takes them (the generated decoder stops at 100 messages).
const decodeOtlpExport = safeDecoder(decodeOtlpProtobuf);
const decodeV1Export = safeDecoder((b) => v1.ExportRequest.decode(b));

const OTLP_SERVICE: ServiceDefinition = {
  export: withRawBytes(otlp.TraceServiceService.export),
};
const INGEST_SERVICE: ServiceDefinition = {
  export: withRawBytes(v1.IngestService.export),
  subscribe: withSafeDecoder(v1.IngestService.subscribe),
  preCheck: withSafeDecoder(v1.IngestService.preCheck),
  preCheckPolicy: withSafeDecoder(v1.IngestService.preCheckPolicy),
};
/** The methods that take a key: every one of the two services. */
const KEYED_PATHS = new Set([...Object.values(OTLP_SERVICE), ...Object.values(INGEST_SERVICE)].map((m) => m.path));

/** An open Subscribe stream: the key it was opened with, that key's project then, its run (empty: the whole project), and how to end it refused. */
interface OpenStream {
  key: string;
  project: string;
  runId: string;
  refuse(code: Status, message: string): void;
}

class CallError extends Error {
  constructor(
    readonly code: Status,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A publish the bus refused for records too large for it (@neatroots/platform's
 * RecordTooLargeError, known by its shape: ingest sees the Bus port only): which of the
 * publish's records, their sizes, and the bus's limit.
 */
function tooLargeForBus(e: unknown): { records: { index: number; bytes: number }[]; limit: number } | undefined {
  const t = e as { code?: unknown; records?: unknown; limit?: unknown } | undefined;
  return t && t.code === 'RECORD_TOO_LARGE' && Array.isArray(t.records) && typeof t.limit === 'number'
    ? { records: t.records as { index: number; bytes: number }[], limit: t.limit }
    : undefined;
}

function describe(r: Rejection): string {
  const where = [`#${r.index}`, r.run_id && `run ${r.run_id}`, r.span_id && `span ${r.span_id}`].filter(Boolean).join(' ');
  return `${where}: ${r.field}: ${r.reason}`;
}

function summarize(rejected: Rejection[]): string {
  const quoted = rejected.slice(0, MAX_QUOTED_REASONS).map(describe).join('; ');
  const more = rejected.length > MAX_QUOTED_REASONS ? `; and ${rejected.length - MAX_QUOTED_REASONS} more` : '';
  return quoted + more;
}

/**
 * The events topic with its records written by envelopeBytes: the bytes of the topic's own
 * codec (v1.Envelope through the generated encoder) without the message objects in between
 * (that codec was about an eighth of ingest's busy time in a profile of bench/distributed.js's
 * ingest to Kafka). An envelope it leaves out goes to the codec.
 */
export function directEvents(events: Topic<Envelope>): Topic<Envelope> {
  return { ...events, encode: (env) => envelopeBytes(env) ?? events.encode(env) };
}

export async function startIngest(opts: IngestOptions): Promise<IngestHandle> {
  const bus = opts.bus;
  const given = opts.topics ?? makeTopics();
  const topics: Topics = { ...given, events: directEvents(given.events) };
  const now = opts.now ?? Date.now;
  const log: Pick<Logger, 'warn' | 'error'> & Partial<Pick<Logger, 'debug'>> = opts.logger ?? console;
  const publishFailures = new RepeatedErrors();
  const keyLookupFailures = new RepeatedErrors();
  const host = opts.host ?? '127.0.0.1';
  const maxBytes = opts.maxReceiveMessageBytes ?? DEFAULT_MAX_RECEIVE_BYTES;
  const replicaId = opts.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const metrics = newMetrics();
  const pressure = new Pressure(opts.pressure ?? {});
  const hub = new NoteHub({
    ...opts.notes,
    now,
    onDropped: (n) => (metrics.notes_dropped += n),
    onGrouped: () => metrics.notes_grouped++,
  });
  const streamCalls = new Map<ServerWritableStream<Decoded<v1.SubscribeRequest>, v1.Note>, OpenStream>();
  let closing = false;

  // ---- shared steps ----

  /**
   * Calls whose key was checked before their message (an OTLP/HTTP body) was read: the project
   * and scope. Such a call was taken then: it goes on if a stop begins while its message is read.
   */
  const admitted = new WeakMap<Metadata, KeyGrant>();

  /** The project and scope of a call's key: refused while closing, without a key or with an unknown one. */
  async function authenticate(md: Metadata): Promise<KeyGrant> {
    const checked = admitted.get(md);
    if (checked !== undefined) return checked;
    notClosing();
    const key = apiKeyFrom(md);
    if (!key) throw new CallError(Status.UNAUTHENTICATED, 'missing API key: send it as "x-api-key" or "authorization: Bearer <key>" metadata');
    let grant: KeyGrant | undefined;
    try {
      grant = grantOf(await opts.resolveKey(key));
    } catch (e) {
      const message = (e as Error)?.message ?? String(e);
      // Every call is refused alike until the lookup works again (review away, or refusing this
      // process's calls for NEATROOTS_INTERNAL_TOKEN): logged once, then at most every 30 s,
      // keyed by the failure (without the times grpc-js puts in its connection errors).
      const quiet = keyLookupFailures.pass(`key lookup: ${message.replace(/ ?\(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '')}`, now());
      if (quiet !== undefined) log.error(`ingest: cannot check API keys, every export and stream is refused (UNAVAILABLE) until it can: ${message}${RepeatedErrors.suffix(quiet)}`);
      throw new CallError(Status.UNAVAILABLE, `cannot check the API key right now (${message}); retry`);
    }
    if (!grant) throw new CallError(Status.UNAUTHENTICATED, 'unknown API key');
    return grant;
  }

  /**
   * The key of a call checked before its message is read: answers the refusal (counted), or
   * undefined with the call admitted. grpc-js reads, unpacks and decodes a call's message before
   * the handler runs, and OTLP/HTTP its body: for a call without a known key, never.
   */
  async function admitKey(md: Metadata): Promise<CallError | undefined> {
    try {
      admitted.set(md, await authenticate(md));
      return undefined;
    } catch (e) {
      const err = e instanceof CallError ? e : new CallError(Status.INTERNAL, (e as Error)?.message ?? String(e));
      if (!(e instanceof CallError)) log.error('ingest: unexpected error checking a key', e);
      inc(metrics.calls_failed, Status[err.code]);
      return err;
    }
  }

  /** grpc-js's hook before a call's message is read: a keyed method's key is checked first (admitKey). */
  const keyFirst: ServerInterceptor = (method, call) => {
    if (!KEYED_PATHS.has(method.path)) return new ServerInterceptingCall(call);
    const intercepted: ServerInterceptingCall = new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (md, pass) => {
            void admitKey(md).then((refused) => (refused ? intercepted.sendStatus({ code: refused.code, details: refused.message }) : pass(md)));
          },
        }),
    });
    return intercepted;
  };

  function body<T>(req: Decoded<T>): T {
    if (!req.ok) throw new CallError(Status.INVALID_ARGUMENT, req.error);
    return req.value;
  }

  /**
   * Publishes the accepted items; what it answers: the requests' items the bus refused as too
   * large for one record (never worth sending again), each a rejection of its own, the others
   * published all the same. Any other failure: UNAVAILABLE, nothing acknowledged.
   * `indexes[i]`: the request's item that `items[i]` came from (an OTLP span gives its run events too).
   */
  async function publish(project: string, items: StreamItem[], indexes: readonly number[]): Promise<{ refused: Rejection[]; published: StreamItem[] }> {
    const refused: Rejection[] = [];
    if (!items.length) return { refused, published: items };
    const received_ms = now();
    let records = items.map((item, i) => ({ key: itemRunId(item), value: { project, received_ms, item } satisfies Envelope, at: indexes[i] ?? i }));
    for (;;) {
      try {
        await bus.publish(
          topics.events,
          records.map(({ key, value }) => ({ key, value })),
        );
        metrics.records_published += records.length;
        return { refused, published: records.map((r) => r.value.item) };
      } catch (e) {
        const big = tooLargeForBus(e);
        const bad = new Set<number>();
        for (const r of big?.records ?? []) {
          const rec = records[r.index];
          if (!rec || bad.has(rec.at)) continue;
          bad.add(rec.at);
          const item = rec.value.item;
          refused.push({
            index: rec.at,
            run_id: rec.key,
            ...(item.kind === 'span' ? { span_id: item.span.span_id } : {}),
            field: item.kind,
            reason: `is ${r.bytes} bytes as a bus record, more than the ${big!.limit} bytes the bus takes in one (see NEATROOTS_MAX_ITEM_CHARS in docs/operations.md); not taken, do not send it again`,
          });
        }
        if (!bad.size) {
          // Once a bus failed, every export is refused alike (a disk error: until the next start):
          // logged once, then at most every 30 s, keyed by the failure.
          const more = publishFailures.quieted('ingest: publishing failed', e, now());
          if (more !== undefined) log.error(`ingest: publishing ${records.length} items failed${more}`, e, runFields(project, records.map((r) => r.key)));
          throw new CallError(Status.UNAVAILABLE, `the bus is unavailable (${(e as Error).message}); not acknowledged, send it again (a span sent twice is stored once)`);
        }
        log.warn(`ingest: ${bad.size} items too large for the bus refused: ${(e as Error).message}`, runFields(project, records.filter((r) => bad.has(r.at)).map((r) => r.key)));
        // The others are published again (the broker may have taken some already: a span sent twice is stored once).
        records = records.filter((r) => !bad.has(r.at));
        if (!records.length) return { refused, published: [] };
      }
    }
  }

  /** A log line's project and run: the run when the items are all of one, else how many runs. */
  function runFields(project: string, runIds: readonly string[]): LogFields {
    const runs = new Set(runIds);
    return runs.size === 1 ? { project, run_id: runIds[0] } : { project, runs: runs.size };
  }

  function countRejected(rejected: Rejection[]): void {
    // attributes.<any key>, or a list's index (tools[0].name, tools[1].name, ...), would make the label set unbounded
    for (const r of rejected) inc(metrics.items_rejected, r.field.startsWith('attributes.') ? 'attributes' : r.field.replace(/\[\d+\]/g, '[]'));
  }

  const limits = opts.limits ?? DEFAULT_SPAN_LIMITS;
  const limitCheck = (): LimitCheck => ({ limits, now: now() });

  function fail(cb: sendUnaryData<never>, e: unknown): void {
    if (e instanceof CallError) {
      inc(metrics.calls_failed, Status[e.code]);
      // A refusal says when to retry (google.rpc.RetryInfo), or OTLP exporters drop the data.
      cb({ code: e.code, details: e.message, ...(e.code === Status.RESOURCE_EXHAUSTED ? { metadata: pressure.trailers(e.message) } : {}) });
      return;
    }
    log.error('ingest: unexpected error', e);
    inc(metrics.calls_failed, Status[Status.INTERNAL]);
    cb({ code: Status.INTERNAL, details: (e as Error)?.message ?? String(e) });
  }

  /**
   * Refuses the export while the pipeline is behind or memory is short, counted by reason; asked
   * before its message is decoded (or, over OTLP/HTTP, read), so a refusal costs none of that.
   */
  function admit(): void {
    const r = pressure.check();
    if (!r) return;
    inc(metrics.exports_refused, r.reason);
    throw new CallError(Status.RESOURCE_EXHAUSTED, r.message);
  }

  function notClosing(): void {
    if (closing) throw new CallError(Status.UNAVAILABLE, 'ingest is shutting down; retry');
  }

  function delivered(notes: Note[], path: 'stream' | 'piggyback'): void {
    if (!notes.length) return;
    metrics.notes_delivered[path] += notes.length;
    const at_ms = now();
    const records = notes.map((n) => ({
      key: n.finding_id || n.id,
      value: { note_id: n.id, finding_id: n.finding_id, project: n.project, at_ms },
    }));
    // Best effort: the note did reach the agent; a lost delivery record only delays "active".
    bus.publish(topics.deliveries, records).catch((e: Error) => {
      log.warn(`ingest: recording note delivery failed: ${e.message}`, runFields(notes[0].project, notes.map((n) => n.run_id)));
    });
  }

  /**
   * An export after the mapping, whichever API it came by: counted, refused when nothing of it
   * was acceptable, else its accepted items published.
   */
  async function accept(project: string, res: MapResult, what: 'span' | 'item', indexes: readonly number[]): Promise<void> {
    metrics.items_received += res.received;
    countRejected(res.rejected);
    if (res.received > 0 && res.accepted === 0) {
      throw new CallError(Status.INVALID_ARGUMENT, `no ${what} was acceptable (${res.received} rejected): ${summarize(res.rejected)}`);
    }
    const { refused, published } = await publish(project, res.items, indexes);
    if (refused.length) {
      countRejected(refused);
      res.items = published;
      res.accepted -= refused.length;
      res.rejected = [...res.rejected, ...refused].sort((a, b) => a.index - b.index);
      if (res.accepted === 0) {
        throw new CallError(Status.INVALID_ARGUMENT, `no ${what} was acceptable (${res.received} rejected): ${summarize(res.rejected)}`);
      }
    }
    metrics.items_accepted += res.accepted;
  }

  // ---- OTLP TraceService/Export (gRPC and HTTP: one path once the body is decoded) ----

  /** An OTLP export's body read, decoded and mapped. */
  async function readOtlp(project: string, read: () => DecodedRequest | Promise<DecodedRequest>): Promise<ReturnType<typeof mapOtlpExport>> {
    // Counted once its body is in hand: an OTLP/HTTP client that went away while sending it, or
    // a body over the bound, was never an export.
    const decoded = await read();
    metrics.exports.otlp++;
    const req = body(decoded);
    const res = mapOtlpExport(req, { project, limits: limitCheck() });
    // An OTLP/JSON id that is not hex reached the mapping as bytes it refuses (otlp-json.ts
    // spanId): the rejection says what was sent instead, e.g. base64 where hex is asked.
    const badIds = decoded.ok ? decoded.badIds : undefined;
    if (badIds) {
      res.rejected = res.rejected.map((r) => {
        const bad = badIds.get(r.index);
        return bad?.field === r.field ? { ...r, reason: bad.reason } : r;
      });
    }
    return res;
  }

  /** `read`: the request's body decoded (over OTLP/HTTP read and unpacked first), asked for once back-pressure let the export in. */
  async function acceptOtlp(md: Metadata, read: () => DecodedRequest | Promise<DecodedRequest>): Promise<otlp.ExportTraceServiceResponse> {
    const { project } = await authenticate(md);
    try {
      admit();
    } catch (e) {
      metrics.exports.otlp++;
      throw e;
    }
    // Read and mapped in a function of its own: the decoded request is not kept while the
    // export waits for the bus (see mapV1Export).
    const res = await readOtlp(project, read);
    await accept(project, res, 'span', res.itemIndexes);
    const response: otlp.ExportTraceServiceResponse = {};
    // OTLP: partial_success is set, with the count and the reasons, only when something was rejected.
    if (res.rejected.length) {
      response.partial_success = {
        rejected_spans: String(res.rejected.length),
        error_message: `${res.rejected.length} of ${res.spans} spans rejected: ${summarize(res.rejected)}`,
      };
    }
    return response;
  }

  async function otlpExport(call: ServerUnaryCall<Buffer, otlp.ExportTraceServiceResponse>, cb: sendUnaryData<otlp.ExportTraceServiceResponse>): Promise<void> {
    try {
      cb(null, await acceptOtlp(call.metadata, () => decodeOtlpExport(call.request)));
    } catch (e) {
      fail(cb, e);
    }
  }

  /** The HTTP receiver's view of acceptOtlp: the refusal as a status code and message, counted as the gRPC ones are. */
  async function otlpHttpExport(md: Metadata, read: () => Promise<DecodedRequest>): Promise<OtlpOutcome> {
    try {
      return { ok: true, response: await acceptOtlp(md, read) };
    } catch (e) {
      if (!(e instanceof CallError)) throw e;
      inc(metrics.calls_failed, Status[e.code]);
      return { ok: false, code: e.code, message: e.message };
    }
  }

  // ---- neatroots.v1 Ingest/Export ----

  /**
   * A neatroots.v1 export's body decoded and mapped, in a function of its own: what the export
   * keeps while it waits for the bus is its items, not the decoded request as well (an async
   * function keeps every local of its frame across an await, used again or not; the decoded
   * events of the exports in flight were a good part of what each young-generation collection
   * copied and promoted).
   */
  function mapV1Export(request: Buffer, project: string): { res: MapResult; indexes: number[]; noteRuns: string[] } {
    const req = body(decodeV1Export(request));
    const res = mapEvents(req.events, { project, limits: limitCheck() });
    // One item per event taken, in order.
    const taken = new Set(res.rejected.map((r) => r.index));
    const indexes: number[] = [];
    for (let i = 0; i < req.events.length; i++) if (!taken.has(i)) indexes.push(i);
    return { res, indexes, noteRuns: req.note_runs };
  }

  async function ingestExport(
    call: ServerUnaryCall<Buffer, v1.ExportResponse>,
    cb: sendUnaryData<v1.ExportResponse>,
  ): Promise<void> {
    metrics.exports.neatroots++;
    try {
      const { project } = await authenticate(call.metadata);
      admit();
      const { res, indexes, noteRuns } = mapV1Export(call.request, project);
      await accept(project, res, 'item', indexes);
      const notes = hub.take(project, noteRuns.length ? noteRuns : res.items.map(itemRunId));
      const rejected: v1.Rejected[] = res.rejected.map((r) => ({ index: r.index, run_id: r.run_id ?? '', span_id: r.span_id ?? '', field: r.field, reason: r.reason }));
      cb(null, { accepted: res.accepted, rejected, notes });
      delivered(notes, 'piggyback');
    } catch (e) {
      fail(cb, e);
    }
  }

  // ---- neatroots.v1 Ingest/PreCheck and PreCheckPolicy ----

  async function preCheck(call: ServerUnaryCall<Decoded<v1.PreCheckRequest>, v1.PreCheckResponse>, cb: sendUnaryData<v1.PreCheckResponse>): Promise<void> {
    try {
      const { project } = await authenticate(call.metadata);
      const req = body(call.request);
      if (!opts.precheck) throw new CallError(Status.UNAVAILABLE, 'no rule engine answers pre-call checks here (a distributed ingest asks the one at NEATROOTS_RULE_ENGINE_ADDR)');
      if (!req.span) throw new CallError(Status.INVALID_ARGUMENT, 'span: is required (the call about to run)');
      const mapped = mapEvents([{ kind: { $case: 'span', value: req.span } }], { project, limits: limitCheck() });
      const item = mapped.items[0];
      if (!item || item.kind !== 'span') {
        const r = mapped.rejected[0];
        throw new CallError(Status.INVALID_ARGUMENT, `span.${r?.field ?? 'span'}: ${r?.reason ?? 'not a span'}`);
      }
      const timeoutMs = req.timeout_ms > 0 ? Math.min(req.timeout_ms, opts.precheck.timeoutMs) : opts.precheck.timeoutMs; // never past NEATROOTS_PRECHECK_TIMEOUT_MS
      const d = call.getDeadline();
      const deadline = d instanceof Date ? d.getTime() : Number.isFinite(d) ? d : undefined;
      const p = opts.precheck;
      // A caller that gives up (its call cancelled) ends the wait at once, deadline or not.
      const gaveUp = new AbortController();
      call.on('cancelled', () => gaveUp.abort());
      const a = await p.precheck({ project, span: item.span, knownSpans: req.known_spans, timeoutMs, deadline, signal: gaveUp.signal }).catch((e: unknown) => {
        if (p.isTimeout(e)) throw new CallError(Status.DEADLINE_EXCEEDED, (e as Error).message);
        // The caller gave up: nothing unexpected (nor logged as such); nobody reads the answer.
        if (gaveUp.signal.aborted) throw new CallError(Status.CANCELLED, 'the caller cancelled the pre-call check');
        throw p.isUnavailable?.(e) ? new CallError(Status.UNAVAILABLE, (e as Error).message) : e;
      });
      cb(null, { decision: a.decision, check_id: a.check_id ?? '', finding_id: a.finding_id ?? '', title: a.title ?? '', text: a.text ?? '' });
    } catch (e) {
      fail(cb, e);
    }
  }

  async function preCheckPolicy(call: ServerUnaryCall<Decoded<v1.PreCheckPolicyRequest>, v1.PreCheckPolicyResponse>, cb: sendUnaryData<v1.PreCheckPolicyResponse>): Promise<void> {
    try {
      const { project } = await authenticate(call.metadata);
      const req = body(call.request);
      const p = opts.precheck;
      if (!p) {
        cb(null, { tools: [], fail_closed: false, timeout_ms: 0 });
        return;
      }
      const failClosed = p.failClosed(project);
      const tools = await Promise.resolve()
        .then(() => p.haltingTools(project, req.workflow || undefined))
        .catch((e: unknown) => {
        // No engine to say which tools: a fail-closed project has every call checked (each
        // check then fails closed); a fail-open one gets no policy, asked again later.
        if (failClosed) return ['*'];
        throw new CallError(Status.UNAVAILABLE, (e as Error).message);
      });
      cb(null, { tools, fail_closed: failClosed, timeout_ms: p.timeoutMs });
    } catch (e) {
      fail(cb, e);
    }
  }

  // ---- neatroots.v1 Ingest/Subscribe ----

  async function subscribe(call: ServerWritableStream<Decoded<v1.SubscribeRequest>, v1.Note>): Promise<void> {
    let fields: LogFields = {};
    try {
      const { project, scope } = await authenticate(call.metadata);
      const req = body(call.request);
      fields = { project, run_id: req.run_id };
      if (req.run_id.length > MAX_ID_LENGTH) {
        throw new CallError(Status.INVALID_ARGUMENT, `run_id: is longer than ${MAX_ID_LENGTH} characters`);
      }
      // Every run's notes (their text can quote other users' tool arguments) and run ids: not for
      // the key agents, even browser agents, are given.
      if (!req.run_id && scope === 'ingest') throw new CallError(Status.PERMISSION_DENIED, PROJECT_STREAM_REFUSED);
      if (call.cancelled) return;
      notClosing();
      const { kept, remove } = hub.addStream({
        project,
        runId: req.run_id,
        write: (note) => {
          call.write(note);
        },
      });
      const done = () => {
        remove();
        streamCalls.delete(call);
        metrics.subscribers = hub.streamCount;
      };
      // authenticate found a key in the metadata
      streamCalls.set(call, {
        key: apiKeyFrom(call.metadata)!,
        project,
        runId: req.run_id,
        refuse(code, message) {
          if (!streamCalls.has(call)) return; // ended meanwhile
          // Out of the hub first: no note goes to the stream from now on.
          done();
          inc(metrics.calls_failed, Status[code]);
          call.emit('error', Object.assign(new Error(message), { code, details: message }));
        },
      });
      metrics.subscribers = hub.streamCount;
      call.on('cancelled', done);
      call.on('close', done);
      call.on('error', done);
      // Headers now, so the client knows the subscription is in place before any note: one that
      // says so (a client cannot tell empty headers from those of a call that failed at once).
      const subscribed = new Metadata();
      subscribed.set('x-neatroots-subscribed', '1');
      call.sendMetadata(subscribed);
      for (const note of kept) call.write(note);
      delivered(kept, 'stream');
    } catch (e) {
      const err = e instanceof CallError ? e : new CallError(Status.INTERNAL, (e as Error)?.message ?? String(e));
      if (!(e instanceof CallError)) log.error('ingest: unexpected error in Subscribe', e, fields);
      inc(metrics.calls_failed, Status[err.code]);
      // grpc-js turns an 'error' event on a server stream into the call's status.
      call.emit('error', Object.assign(new Error(err.message), { code: err.code, details: err.message }));
    }
  }

  // ---- notes from the bus ----
  // A group of this process's own, from now on: every replica hands out every note, and a
  // process that starts does not replay the topic's history. Best effort, as checks.md says:
  // notes published while no ingest runs, or kept here when it restarts, are not delivered.
  // Its offsets are committed (a rejoin after a broker restart goes on where it was, not at the
  // latest), and the group is deleted when the process stops (transient): a new name each start
  // would otherwise leave one more group on the broker each time, its lag growing for days.

  const notesSub: Subscription = await bus.subscribe(
    topics.notes,
    { group: `ingest-notes-${replicaId}`, fromBeginning: false, transient: true },
    async (batch) => {
      for (const { value: note } of batch.records) {
        metrics.notes_received++;
        if (hub.route(note) > 0) delivered([note], 'stream');
      }
    },
  );
  const sweeper = setInterval(() => hub.sweep(), 30_000);
  sweeper.unref();

  // ---- open streams' keys, checked again ----
  // A stream's key is checked when it opens; a stream lasts as long as its run or longer, so a
  // key revoked (or moved to another project) since then ends it, once its lookup says so.

  let rechecking = false;
  async function recheckStreamKeys(): Promise<void> {
    if (rechecking || closing) return;
    rechecking = true;
    try {
      const byKey = new Map<string, OpenStream[]>();
      for (const s of streamCalls.values()) {
        const same = byKey.get(s.key);
        if (same) same.push(s);
        else byKey.set(s.key, [s]);
      }
      // One lookup a key (thousands of streams of one key cost one lookup), KEY_RECHECK_CONCURRENCY
      // keys at a time: a lookup that hangs does not hold up the round's other keys.
      const keys = [...byKey];
      const lookUp = async (): Promise<void> => {
        for (let next = keys.shift(); next && !closing; next = keys.shift()) {
          const [key, streams] = next;
          let grant: KeyGrant | undefined;
          try {
            grant = grantOf(await opts.resolveKey(key));
          } catch {
            continue; // cannot tell now: asked again next time
          }
          if (closing) return;
          for (const s of streams) {
            if (grant?.project !== s.project) {
              s.refuse(Status.UNAUTHENTICATED, grant ? `the API key now opens another project than ${s.project}; subscribe again` : 'the API key is no longer known (revoked)');
            } else if (!s.runId && grant.scope === 'ingest') {
              s.refuse(Status.PERMISSION_DENIED, PROJECT_STREAM_REFUSED);
            }
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(KEY_RECHECK_CONCURRENCY, keys.length) }, lookUp));
    } finally {
      rechecking = false;
    }
  }
  const keyRecheck = setInterval(() => void recheckStreamKeys(), opts.keyRecheckMs ?? 60_000);
  keyRecheck.unref();

  // ---- servers ----

  const keepalive = opts.keepalive ?? { everyMs: 60_000, timeoutMs: 20_000 };
  const serverOptions = {
    'grpc.max_receive_message_length': maxBytes,
    'grpc.keepalive_time_ms': keepalive.everyMs,
    'grpc.keepalive_timeout_ms': keepalive.timeoutMs,
    interceptors: [keyFirst],
  };
  const otlpImpl = { export: otlpExport };
  const ingestImpl = { export: ingestExport, subscribe, preCheck, preCheckPolicy };
  const otlpPortWanted = opts.otlpPort ?? DEFAULT_OTLP_PORT;
  const grpcPortWanted = opts.grpcPort ?? DEFAULT_GRPC_PORT;
  const servers: Server[] = [];
  let otlpPort: number;
  let grpcPort: number;
  let otlpHttp: OtlpHttpHandle | undefined;
  try {
    if (otlpPortWanted === grpcPortWanted && otlpPortWanted !== 0) {
      const server = new Server(serverOptions);
      server.addService(OTLP_SERVICE, otlpImpl);
      server.addService(INGEST_SERVICE, ingestImpl);
      servers.push(server);
      otlpPort = grpcPort = await bindGrpc(server, host, otlpPortWanted);
    } else {
      const otlpServer = new Server(serverOptions);
      otlpServer.addService(OTLP_SERVICE, otlpImpl);
      servers.push(otlpServer);
      otlpPort = await bindGrpc(otlpServer, host, otlpPortWanted);
      const ingestServer = new Server(serverOptions);
      ingestServer.addService(INGEST_SERVICE, ingestImpl);
      servers.push(ingestServer);
      grpcPort = await bindGrpc(ingestServer, host, grpcPortWanted);
    }
    if (opts.otlpHttpPort !== undefined) {
      otlpHttp = await startOtlpHttp({
        host,
        port: opts.otlpHttpPort,
        maxBodyBytes: maxBytes,
        corsOrigins: opts.otlpHttpCorsOrigins,
        retryAfterMs: opts.pressure?.retryAfterMs ?? 1000,
        checkKey: admitKey,
        exportTraces: otlpHttpExport,
        onRefused: (code) => inc(metrics.calls_failed, Status[code]),
        logger: log,
      });
    }
  } catch (e) {
    for (const s of servers) s.forceShutdown();
    clearInterval(sweeper);
    clearInterval(keyRecheck);
    await notesSub.close();
    throw e;
  }

  let closed: Promise<void> | undefined;
  return {
    otlpPort,
    grpcPort,
    otlpHttpPort: otlpHttp?.port,
    metrics,
    close() {
      closed ??= (async () => {
        closing = true;
        clearInterval(sweeper);
        clearInterval(keyRecheck);
        pressure.close();
        // Streams never end on their own: end them so the servers can drain.
        hub.drainStreams();
        for (const call of streamCalls.keys()) call.end();
        streamCalls.clear();
        metrics.subscribers = 0;
        await Promise.all([
          ...servers.map((s) => closeGrpcServer(s, opts.shutdownGraceMs ?? 5000)),
          otlpHttp?.close(opts.shutdownGraceMs ?? 5000),
        ]);
        await notesSub.close();
      })();
      return closed;
    },
  };
}
