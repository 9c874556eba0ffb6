import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { drainHttpServer, setPlainSecurityHeaders } from '@neatroots/ports';

/**
 * Each process's admin port: /healthz (alive: 503 once it cannot go on until it is started
 * again), /readyz (ready to serve: its dependencies answered) and /metrics (Prometheus). Kept off the service ports so probes and scrapes
 * never queue behind traffic.
 */
export interface Metrics {
  registry: Registry;
  spansReceived: Counter<'source'>;
  spansAccepted: Counter<'source'>;
  spansRejected: Counter<'source' | 'reason'>;
  published: Counter<'topic'>;
  consumed: Counter<'topic' | 'group'>;
  findings: Counter<'status'>;
  /**
   * Seconds from the receipt at ingest of the span (or run event) a finding was raised on to the
   * finding's publish being acknowledged, by the check's kind (rule; a question's yes_no, choice
   * or score) and action (flag, halt). A requires_before finding includes its wait for a late
   * span (250 ms); a question finding, the model's answer. Across processes it reads two clocks
   * (ingest's and this one's).
   */
  findingDelay: Histogram<'kind' | 'action'>;
  consumerRestarts: Counter<'topic' | 'group'>;
  /**
   * Kafka messages of a topic a consumer group has not committed yet, summed over the topic's
   * partitions, read from the broker every 10 s by each process consuming it (distributed).
   */
  consumerLag: Gauge<'topic' | 'group'>;
  dependencyErrors: Counter<'dependency'>;
  /** Spans of exports refused by back-pressure (RESOURCE_EXHAUSTED), by reason: backlog, memory. */
  spansRefused: Counter<'reason'>;
  /**
   * Calls ingest refused as a whole, by gRPC status name (`code`): a missing or unknown key, a
   * body that does not decode, back-pressure, the bus unavailable, ... Over OTLP/HTTP the
   * refusal's gRPC code (401 UNAUTHENTICATED, 400 INVALID_ARGUMENT, 429 RESOURCE_EXHAUSTED, ...).
   */
  ingestCallsFailed: Counter<'code'>;
  /** Records accepted and not processed yet (the in-process bus's slowest group; Kafka: unsent). */
  busBacklog: Gauge<'topic'>;
  deadLetters: Counter<'source'>;
  checksDisabled: Gauge<'check_id' | 'source'>;
  /**
   * The question service's cache lookups before a model is asked, by what asked (question,
   * second_look, decision) and where the answer came from: memory (this process's), shared
   * (another replica's, or this service's before a restart: Redis) or miss (the model was asked).
   */
  questionCache: Counter<'kind' | 'result'>;
  questionTasks: Counter;
  /**
   * The question service's requests to its models (every HTTP request, retries included), by
   * endpoint (the model's role: decision, local, reasoning) and outcome: ok, timeout,
   * rate_limited, server (5xx), connection, rejected (another 4xx: a wrong key, a bad request),
   * malformed (a reply that left questions without a readable answer), aborted (its caller gave up).
   */
  modelRequests: Counter<'endpoint' | 'outcome'>;
  /** The question service's model queues now: questions and chats waiting (queued) and requests under way (active), by endpoint. */
  modelQueue: Gauge<'endpoint' | 'state'>;
  /** Questions the question service was asked, by result: answered, not_checked, and escalated (the fast classifier's flagged answer sent on to the LLM: counted in answered or not_checked too). */
  questions: Counter<'result'>;
  /** Question tasks the rule engine did not hand over: the question service was too far behind (NEATROOTS_MAX_QUESTION_BACKLOG). */
  questionTasksShed: Counter;
  /**
   * Notes and halts at ingest, by outcome: received (from the bus), stream or piggyback (handed
   * to an agent that way), dropped (kept for an agent that never came back, expired or pushed
   * out), grouped (held back: its group already sent one in the run).
   */
  notes: Counter<'outcome'>;
  /** 1 once a part of the process stopped for good (Platform.failing: a disk error embedded), until it starts again. */
  failing: Gauge;
}

export function createMetrics(service: string): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, prefix: 'neatroots_' });
  const reg = { registers: [registry] };
  return {
    registry,
    spansReceived: new Counter({ name: 'neatroots_spans_received_total', help: 'Spans received by ingest', labelNames: ['source'], ...reg }),
    spansAccepted: new Counter({ name: 'neatroots_spans_accepted_total', help: 'Spans accepted and published', labelNames: ['source'], ...reg }),
    spansRejected: new Counter({ name: 'neatroots_spans_rejected_total', help: 'Spans rejected, by reason', labelNames: ['source', 'reason'], ...reg }),
    published: new Counter({ name: 'neatroots_bus_published_total', help: 'Records published to the bus', labelNames: ['topic'], ...reg }),
    consumed: new Counter({ name: 'neatroots_bus_consumed_total', help: 'Records consumed from the bus', labelNames: ['topic', 'group'], ...reg }),
    findings: new Counter({ name: 'neatroots_findings_total', help: "Finding events of the rule engine's checks (raised, updated and resolved together: status is always any)", labelNames: ['status'], ...reg }),
    findingDelay: new Histogram({
      name: 'neatroots_finding_delay_seconds',
      help: "From the receipt at ingest of the span a finding was raised on to the finding published, by the check's kind and action",
      labelNames: ['kind', 'action'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      ...reg,
    }),
    consumerRestarts: new Counter({ name: 'neatroots_bus_consumer_restarts_total', help: 'Kafka consumers kafkajs stopped for good (an error it does not retry) and the bus started again', labelNames: ['topic', 'group'], ...reg }),
    consumerLag: new Gauge({
      name: 'neatroots_consumer_lag',
      help: "Kafka messages of the topic the group has not committed yet, over all partitions, read from the broker every 10 s (a message holds one run's records of one publish)",
      labelNames: ['topic', 'group'],
      ...reg,
    }),
    dependencyErrors: new Counter({ name: 'neatroots_dependency_errors_total', help: 'Errors talking to Redis, Postgres, Kafka', labelNames: ['dependency'], ...reg }),
    spansRefused: new Counter({ name: 'neatroots_spans_refused_total', help: 'Exports refused by back-pressure, by reason (exports, not spans: a refused export is not decoded)', labelNames: ['reason'], ...reg }),
    ingestCallsFailed: new Counter({
      name: 'neatroots_ingest_calls_failed_total',
      help: 'Calls ingest refused as a whole (exports, pre-call checks, Subscribe streams; OTLP/gRPC, OTLP/HTTP and neatroots.v1), by gRPC status name',
      labelNames: ['code'],
      ...reg,
    }),
    busBacklog: new Gauge({ name: 'neatroots_bus_backlog', help: 'Records accepted and not processed yet', labelNames: ['topic'], ...reg }),
    failing: new Gauge({ name: 'neatroots_failing', help: '1 once a part of this process stopped for good (embedded: the bus log or a window journal after a disk error) and it must be started again; /healthz says why', ...reg }),
    deadLetters: new Counter({ name: 'neatroots_dead_letters_total', help: 'Items set aside in dead_letters (the store refused them, or no handler could take them), by source', labelNames: ['source'], ...reg }),
    checksDisabled: new Gauge({
      name: 'neatroots_checks_disabled',
      help: 'match checks disabled because a pattern went over its time limit on a span, until restart or until the check is changed or deleted (1 per check)',
      labelNames: ['check_id', 'source'],
      ...reg,
    }),
    questionCache: new Counter({
      name: 'neatroots_question_cache_lookups_total',
      help: 'Question service cache lookups before a model is asked, by kind (question, second_look, decision) and result (memory, shared, miss)',
      labelNames: ['kind', 'result'],
      ...reg,
    }),
    questionTasks: new Counter({
      name: 'neatroots_question_tasks_total',
      help: 'Question tasks the question service has processed, answered or not checked (a record of the questions topic holds one run\'s tasks of one step)',
      ...reg,
    }),
    modelRequests: new Counter({
      name: 'neatroots_model_requests_total',
      help: 'Requests of the question service to its models (retries included), by endpoint (decision, local, reasoning) and outcome (ok, timeout, rate_limited, server, connection, rejected, malformed, aborted)',
      labelNames: ['endpoint', 'outcome'],
      ...reg,
    }),
    modelQueue: new Gauge({
      name: 'neatroots_model_queue',
      help: 'The question service\'s model queues now, by endpoint (decision, local, reasoning) and state: queued (waiting for a request), active (requests under way)',
      labelNames: ['endpoint', 'state'],
      ...reg,
    }),
    questions: new Counter({
      name: 'neatroots_questions_total',
      help: 'Questions the question service was asked, by result: answered, not_checked (the model failed or its answer was unreadable), escalated (the fast classifier flagged and the LLM was asked; also in answered or not_checked)',
      labelNames: ['result'],
      ...reg,
    }),
    questionTasksShed: new Counter({
      name: 'neatroots_question_tasks_shed_total',
      help: 'Question tasks not handed to the question service because it was too far behind (NEATROOTS_MAX_QUESTION_BACKLOG): those questions were not asked',
      ...reg,
    }),
    notes: new Counter({
      name: 'neatroots_notes_total',
      help: 'Notes and halts at ingest, by outcome: received, stream, piggyback (handed to an agent), dropped (never taken), grouped (held back: its group already sent one in the run)',
      labelNames: ['outcome'],
      ...reg,
    }),
  };
}

export interface AdminServer {
  port: number;
  /**
   * Stops serving: every answer from then on closes its connection (a keep-alive scraper or
   * probe moves on), idle connections close at once, and what is still open after graceMs
   * (default 5000) is cut.
   */
  close(graceMs?: number): Promise<void>;
}

export async function startAdmin(opts: {
  host: string;
  port: number;
  metrics: Metrics;
  /** Ready to take traffic (readiness probe). */
  ready: () => boolean | Promise<boolean>;
  /**
   * Why the process cannot go on until it is started again (liveness fails with it), or
   * undefined: alive as long as it answers.
   */
  failing?: () => string | undefined;
}): Promise<AdminServer> {
  /** close() began: every answer from now on closes its connection. */
  let closing = false;
  const server: Server = createServer((req, res) => {
    setPlainSecurityHeaders(res);
    const path = (req.url ?? '/').split('?')[0];
    const send = (code: number, type: string, body: string) => {
      // Closing: this connection's last answer (node closes it once sent). Without it node's
      // server.close() kept answering a scraper or probe that kept sending on its connection.
      if (closing) res.setHeader('Connection', 'close');
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    const failing = opts.failing?.();
    if (path === '/healthz') {
      if (failing) return send(503, 'application/json', JSON.stringify({ status: 'failing', error: `${failing}; start the process again` }));
      return send(200, 'application/json', '{"status":"ok"}');
    }
    if (path === '/readyz') {
      if (failing) return send(503, 'application/json', JSON.stringify({ status: 'not ready', error: failing }));
      Promise.resolve(opts.ready()).then(
        (ok) => send(ok ? 200 : 503, 'application/json', JSON.stringify({ status: ok ? 'ready' : 'not ready' })),
        (err: unknown) => send(503, 'application/json', JSON.stringify({ status: 'not ready', error: String(err) })),
      );
      return;
    }
    if (path === '/metrics') {
      opts.metrics.registry.metrics().then(
        (body) => send(200, opts.metrics.registry.contentType, body),
        (err: unknown) => send(500, 'text/plain', String(err)),
      );
      return;
    }
    send(404, 'application/json', '{"error":{"code":"not_found","message":"try /healthz, /readyz or /metrics"}}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  let closed: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    close(graceMs = 5_000) {
      closing = true;
      closed ??= drainHttpServer(server, graceMs);
      return closed;
    },
  };
}
