import type { Bus } from './bus';
import type { RecordedClock } from './clock';
import type { Db } from './db';
import type { Jobs } from './jobs';
import type { SharedBoard, SharedCache } from './shared-cache';
import type { WindowStore, WindowStoreOptions } from './windows';

/**
 * The one composition root's vocabulary. Each service exports one ServiceModule: its name,
 * what it needs, and how it starts. A Platform supplies the drivers those needs name: the
 * embedded one (in-process bus, memory windows, PGlite) or the distributed one (Kafka, Redis,
 * Postgres). startServices (@neatroots/platform) starts any list of modules on either, in
 * dependency order, and stops them in the reverse order. A new service is one more module.
 */

/** Drivers a module asks the platform for. */
export type Driver = 'bus' | 'windows' | 'db' | 'jobs';

/**
 * What a service needs: platform drivers, and links by name to what other modules provide
 * ('review', 'question') or the composition root supplies ('checks', 'models').
 */
export type Need = Driver | (string & {});

export interface Platform {
  readonly kind: 'embedded' | 'distributed' | 'replay';
  /**
   * Whose time the pipeline runs on. Absent: the wall clock, and pending waits fire on a
   * timer. Present (replay): the recording's time, moved by the rule engine to each item's
   * time as it reaches it; it fires what is due before each item instead.
   */
  readonly clock?: RecordedClock;
  /** The one bus of this process (created on first use; every module shares it). */
  bus(): Bus;
  /**
   * A window store; `name` keeps different kinds of windows apart ('' for the rule engine's).
   * The first call for a name opens it with `opts`; later calls get the same store.
   */
  windows<W>(name: string, opts?: WindowStoreOptions): Promise<WindowStore<W>>;
  /** The database (opened on first use). Only the review service asks for it. */
  db(): Promise<Db>;
  /** Background jobs (opened on first use): BullMQ on Redis distributed, in this process embedded. */
  jobs(): Promise<Jobs>;
  /**
   * A cache the deployment's processes share, its keys kept apart from other names' (Redis
   * distributed). Absent where there is one process (embedded, replay): a module keeps what it
   * caches in memory there.
   */
  sharedCache?(name: string): Promise<SharedCache>;
  /**
   * Entries the deployment's processes keep for each other to read, under `name` (Redis
   * distributed). Absent where there is one process (embedded, replay).
   */
  sharedBoard?(name: string): Promise<SharedBoard>;
  /**
   * Its drivers answer (readiness): those named in `only` (absent: every driver it opened).
   * Rejects naming the drivers that did not.
   */
  ready(only?: readonly Driver[]): Promise<boolean>;
  /**
   * Why this process cannot go on until it is started again, or undefined: a part that stops at
   * a disk error so that what is on disk stays whole (the embedded bus log, a window journal).
   * Liveness (/healthz) and gRPC health say so, so that a supervisor restarts the process.
   */
  failing?(): string | undefined;
  /**
   * Once the edges stopped accepting: lets what they accepted be processed (the in-process
   * bus empties; Kafka keeps it anyway), and the running jobs end or be handed back (the
   * distributed jobs' workers stop here), before the modules stop and the links close.
   */
  drain(): Promise<void>;
  /** Closes every driver opened. */
  close(): Promise<void>;
}

/** Fields a log line may carry besides its message. */
export interface LogFields {
  service?: string;
  project?: string;
  run_id?: string;
  [key: string]: unknown;
}

/** Structured logging (the pino logger of @neatroots/platform). */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  /** `err` is logged with its message and stack. */
  error(msg: string, err?: unknown, fields?: LogFields): void;
  /** A logger whose every line carries `fields` (a service's name, a run id). */
  child(fields: LogFields): Logger;
}

type Labels = Record<string, string | number>;

/** A Prometheus counter or gauge, as a module updates it. */
export interface CounterPort {
  inc(labels: Labels, value?: number): void;
}
export interface GaugePort {
  set(labels: Labels, value: number): void;
  /** Drops every series: a gauge rebuilt from a list (the checks disabled) starts from none. */
  reset(): void;
}

export interface HistogramPort {
  observe(labels: Labels, value: number): void;
}

/** The process's metrics (/metrics on the admin port). */
export interface ServiceMetrics {
  spansReceived: CounterPort;
  spansAccepted: CounterPort;
  spansRejected: CounterPort;
  published: CounterPort;
  consumed: CounterPort;
  findings: CounterPort;
  /** Seconds from a span's receipt at ingest to the finding raised on it published, by the check's kind and action. */
  findingDelay: HistogramPort;
  consumerLag: GaugePort;
  dependencyErrors: CounterPort;
  /** Spans of exports refused by back-pressure, by reason. */
  spansRefused: CounterPort;
  /** Calls ingest refused as a whole, by gRPC status name (code). */
  ingestCallsFailed: CounterPort;
  busBacklog: GaugePort;
  /** Items set aside in dead_letters, by where (store.events, bus:<topic>/<group>, ...). */
  deadLetters: CounterPort;
  /** `match` checks disabled for a slow pattern, until restart or until their pattern changes: 1 per check (check_id, source). */
  checksDisabled: GaugePort;
  /** The question service's cache lookups, by what asked (question, second_look, decision) and where the answer came from (memory, shared, miss). */
  questionCache: CounterPort;
  /** Question tasks the question service processed (answered or not checked). */
  questionTasks: CounterPort;
  /** The question service's requests to its models, by endpoint (the model's role: decision, local, reasoning) and outcome (ok, timeout, rate_limited, server, connection, rejected, malformed, aborted). */
  modelRequests: CounterPort;
  /** The question service's model queues now, by endpoint and state (queued, active). */
  modelQueue: GaugePort;
  /** Questions the question service was asked, by result: answered, not_checked, escalated (the fast classifier's answer sent on to the LLM). */
  questions: CounterPort;
  /** Question tasks the rule engine did not hand over: the question service was too far behind. */
  questionTasksShed: CounterPort;
  /** Notes and halts at ingest, by outcome (received, stream, piggyback, dropped, grouped). */
  notes: CounterPort;
}

/** What a finding delay is read from (a FindingEvent has it). */
type TimedFinding = { status: string; kind: string; action: string; received_ms?: number };

/**
 * Observes the delay of each finding raised (ServiceMetrics.findingDelay), at the moment its
 * publish was acknowledged. Updates and resolutions are left out, and so are findings without
 * a receipt time.
 */
export function observeFindingDelays(histogram: HistogramPort, findings: readonly TimedFinding[], now = Date.now()): void {
  for (const f of findings) {
    if (f.status !== 'raised' || f.received_ms === undefined) continue;
    histogram.observe({ kind: f.kind, action: f.action }, Math.max(0, now - f.received_ms) / 1000);
  }
}

/**
 * A module's hook for its findings once published (the rule engine's and the question
 * service's onFindingsPublished): their delays on /metrics. None in replay, whose receipt times
 * are the recording's.
 */
export function findingDelayHook(ctx: Pick<ServiceContext, 'metrics' | 'platform'>): ((findings: readonly TimedFinding[]) => void) | undefined {
  return ctx.platform.clock ? undefined : (findings) => observeFindingDelays(ctx.metrics.findingDelay, findings);
}

/** A gRPC service definition and implementation (@grpc/grpc-js's, kept opaque here). */
export interface GrpcService {
  service: object;
  implementation: object;
}

export interface ServiceContext<C = unknown> {
  /** The validated configuration (each module types the part it reads). */
  config: C;
  /** Lines carry the service's name. */
  log: Logger;
  metrics: ServiceMetrics;
  platform: Platform;
  /**
   * Serves a gRPC service (its full name, e.g. neatroots.v1.Review) on the process's service
   * port, with its grpc.health.v1 status. The embedded platform has no service port: its
   * modules call each other in-process.
   */
  serveGrpc(name: string, svc: GrpcService): void;
  /** Sets a grpc.health.v1 status of a service this module serves on a server of its own. */
  setHealth(name: string, serving: boolean): void;
  /**
   * What another module of this process provides under `name`, else what the composition root
   * supplies (a gRPC client of that service elsewhere, the checks in effect).
   */
  link<T>(name: string): Promise<T>;
}

export interface Running {
  /** Links this module offers the others, by name. */
  provides?: Record<string, unknown>;
  /** Ports it listens on, by name (otlp, grpc, http), for the start-up banner. */
  ports?: Record<string, number>;
  /** Whether it can take traffic (readiness); absent: once started. */
  ready?(): Promise<boolean>;
  /** Stops: accepting first, then what is in hand finishes and is flushed. */
  stop(): Promise<void>;
}

export interface ServiceModule<C = unknown> {
  name: string;
  needs: readonly Need[];
  /** Links it provides (started before the modules of this process that need them). */
  provides?: readonly string[];
  /**
   * Takes traffic from outside (agents, people): started last, stopped first, and the platform
   * drains after the edges stopped and before the rest do.
   */
  edge?: boolean;
  /**
   * The drivers whose outage takes this module's process out of its Service (readiness): the
   * ones the requests routed to it use. Absent: every driver the process opened. Review serves
   * reads from Postgres alone, so a Kafka or Redis outage must not take the api and ingest's key
   * lookups down with it.
   */
  readyOn?: readonly Driver[];
  start: (ctx: ServiceContext<C>) => Promise<Running>;
}

/**
 * Moves a Prometheus counter up to a count a service keeps itself (its metrics object), once a
 * second; returns what stops it.
 */
export function syncCounter(counter: CounterPort, labels: Labels, read: () => number, everyMs = 1_000): () => void {
  let last = 0;
  const timer = setInterval(() => {
    const n = read();
    if (n > last) counter.inc(labels, n - last);
    last = n;
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
