import { credentials, Metadata, Server, status } from '@grpc/grpc-js';
import { compileRuleSet, parseCheck, RuleEngine, type RunWindow } from '@neatroots/checks';
import { MemoryBus, MemoryWindowStore, until } from '@neatroots/platform';
import { envelopeToProto, makeTopics } from '@neatroots/messages';
import { bindGrpc, closeGrpcServer, v1 } from '@neatroots/proto';
import type { Span } from '@neatroots/spans';
import { RuleEngineClient, RuleEngineUnavailableError, ruleEngineGrpcService } from './grpc';
import { startRuleEngine } from './service';
import { haltingTools, MAX_PRECHECK_TIMEOUT_MS, Prechecker, PrecheckTimeoutError, type PrecheckAnswer, type PrecheckRequest } from './precheck';

/** The pre-call check over gRPC (the distributed deployment): ingest's client, the rule engine's server. */
const REFUND = parseCheck(
  { id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }, guidance: 'Look the order up first.', action: 'halt' },
  'mine.yaml',
  'user',
);
const rules = compileRuleSet([REFUND], () => ({ test: () => false }));
const span = (id: string, tool: string, at: number): Span => ({ run_id: 'r1', span_id: id, type: 'tool', name: tool, tool, status: 'ok', start_ms: at, end_ms: at + 1, input: { order: 7 } });

describe('RuleEngine over gRPC', () => {
  let windows: MemoryWindowStore<RunWindow>;
  let server: Server;
  let client: RuleEngineClient;
  /** The generated client, as any caller of the service may use it (no deadline of its own). */
  let raw: v1.RuleEngineClient;
  let loads: number;
  /** What the server answers with: the Prechecker, or in a test an answer held or given at will. */
  let answer: (req: PrecheckRequest) => Promise<PrecheckAnswer>;

  beforeEach(async () => {
    windows = new MemoryWindowStore<RunWindow>();
    loads = 0;
    const load = windows.load.bind(windows);
    windows.load = (keys) => (loads++, load(keys));
    const prechecker = new Prechecker({ windows, rules: () => rules, steering: () => true });
    answer = (r) => prechecker.precheck(r);
    const svc = ruleEngineGrpcService({ precheck: (r) => answer(r), haltingTools: (p, w) => haltingTools(rules, p, w) });
    server = new Server();
    server.addService(svc.service, svc.implementation);
    const port = await bindGrpc(server, '127.0.0.1', 0);
    client = new RuleEngineClient(`127.0.0.1:${port}`);
    raw = new v1.RuleEngineClient(`127.0.0.1:${port}`, credentials.createInsecure());
  });

  afterEach(async () => {
    client.close();
    raw.close();
    await closeGrpcServer(server);
  });

  it('answers halt with the rule and its guidance, and allow after the lookup is in the window', async () => {
    expect(await client.precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()) })).toEqual({
      decision: 'halt',
      check_id: 'refund-without-lookup',
      finding_id: expect.any(String),
      title: 'Refund without lookup',
      text: 'Look the order up first.',
    });
    const live = new RuleEngine({ windows, rules: () => rules, steering: () => true });
    await (await live.process([{ project: 'shop', received_ms: 1000, item: { kind: 'span', span: span('s1', 'lookup_order', 1000) } }])).commit();
    expect(await client.precheck({ project: 'shop', span: span('s3', 'issue_refund', Date.now()), knownSpans: 1 })).toEqual({ decision: 'allow' });
    expect(await client.haltingTools('shop', 'refunds')).toEqual(['issue_refund']);
  });

  it('names a wait that ran out as the engine does (ingest answers DEADLINE_EXCEEDED)', async () => {
    const err = await client.precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 4, timeoutMs: 30 }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'PrecheckTimeoutError', message: expect.stringContaining('saw 0 of its 4 exported spans within 30 ms') });
  });

  it("tells the engine to give up before the caller's deadline, and does not keep the caller past it", async () => {
    // The engine answers at once with its own reason: the wait it was given, shorter than
    // what is left of the caller's deadline (so that reason, not a bare deadline, comes back).
    const asked: PrecheckRequest[] = [];
    answer = async (req) => {
      asked.push(req);
      throw new PrecheckTimeoutError(req.timeoutMs!, 1, req.knownSpans!);
    };
    const sent = Date.now();
    const deadline = sent + 10_000;
    const early = await client.precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 4, timeoutMs: 60_000, deadline }).catch((e: Error) => e);
    expect(early).toMatchObject({ name: 'PrecheckTimeoutError', message: expect.stringContaining('saw 1 of its 4 exported spans within') });
    const told = Number(/within (\d+) ms/.exec((early as Error).message)?.[1]);
    expect(told).toBe(asked[0].timeoutMs);
    expect(told).toBeGreaterThan(0);
    // A few milliseconds are left for the way back.
    expect(told).toBeLessThanOrEqual(deadline - sent - 5);

    // The engine holds its answer past the caller's deadline: the caller gets a timeout at
    // its deadline all the same (ingest answers DEADLINE_EXCEEDED), naming where it waited.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    answer = async (req) => {
      asked.push(req);
      await held;
      return { decision: 'allow' };
    };
    const late = Date.now() + 1_000; // room for a loaded machine to hand the call to the engine first
    const err = await client.precheck({ project: 'shop', span: span('s10', 'issue_refund', Date.now()), knownSpans: 4, timeoutMs: 60_000, deadline: late }).catch((e: Error) => e);
    release();
    expect(Date.now()).toBeGreaterThanOrEqual(late);
    expect(err).toMatchObject({ name: 'PrecheckTimeoutError', message: expect.stringContaining(`rule engine at ${client.address}: PreCheck`) });
    expect(asked[1].timeoutMs).toBeLessThan(1_000);
  });

  /** How the engine's next check ends (its error's name, or "answered"), once it has; undefined until then. */
  const engineOutcome = (): (() => string | undefined) => {
    const inner = answer;
    let outcome: string | undefined;
    answer = (r) => {
      const p = inner(r);
      p.then(() => (outcome = 'answered'), (e: Error) => (outcome = e.name));
      return p;
    };
    return () => outcome;
  };

  const rawCall = (id: string, knownSpans: number, timeoutMs: number): v1.EnginePreCheckRequest => ({
    call: envelopeToProto({ project: 'shop', received_ms: Date.now(), item: { kind: 'span', span: span(id, 'issue_refund', Date.now()) } }),
    known_spans: knownSpans,
    timeout_ms: timeoutMs,
  });

  it('stops reading the window when the caller cancels, though it asked to wait for days', async () => {
    let ended: { code: number } | undefined;
    const engine = engineOutcome();
    // Spans that never come, no deadline, the longest wait the field holds (about 24.8 days).
    const call = raw.preCheck(rawCall('s11', 5, 2_147_483_647), new Metadata(), (err) => (ended = err ?? { code: status.OK }));
    await until('three reads of the window', () => loads >= 3, 30_000, 5);
    call.cancel();
    // The engine's check ends, cancelled, when the cancel reaches it; it reads nothing more.
    expect(await until("the engine's check to end", engine, 30_000, 5)).toBe('PrecheckCancelledError');
    const atCancel = loads;
    await new Promise((r) => setTimeout(r, 200));
    expect(loads).toBe(atCancel);
    expect(ended?.code).toBe(status.CANCELLED);
  });

  it("ingest's client cancels its call when its caller gave up (signal): the engine stops reading the window", async () => {
    const gaveUp = new AbortController();
    // Spans that never come, a minute to wait for them, no deadline.
    const engine = engineOutcome();
    const asked = client.precheck({ project: 'shop', span: span('s14', 'issue_refund', Date.now()), knownSpans: 5, timeoutMs: 60_000, signal: gaveUp.signal }).catch((e: Error) => e);
    await until('three reads of the window', () => loads >= 3, 30_000, 5);
    gaveUp.abort();
    expect(await asked).toMatchObject({ message: expect.stringContaining('PreCheck') });
    expect(await until("the engine's check to end", engine, 30_000, 5)).toBe('PrecheckCancelledError');
    const atCancel = loads;
    await new Promise((r) => setTimeout(r, 200));
    expect(loads).toBe(atCancel);
  });

  it('waits no longer than MAX_PRECHECK_TIMEOUT_MS, whatever timeout_ms asks', async () => {
    const asked: PrecheckRequest[] = [];
    answer = async (req) => {
      asked.push(req);
      return { decision: 'allow' };
    };
    await new Promise((resolve, reject) => raw.preCheck(rawCall('s12', 5, 2_147_483_647), new Metadata(), (err, res) => (err ? reject(err) : resolve(res))));
    expect(asked[0].timeoutMs).toBe(MAX_PRECHECK_TIMEOUT_MS);
    // Ingest's client, asked without a deadline, tells the engine no more either.
    await client.precheck({ project: 'shop', span: span('s13', 'issue_refund', Date.now()), knownSpans: 5, timeoutMs: 2_147_483_647 });
    expect(asked[1].timeoutMs).toBe(MAX_PRECHECK_TIMEOUT_MS);
  });

  it('says the engine is unreachable when nothing listens (ingest answers UNAVAILABLE)', async () => {
    await closeGrpcServer(server);
    const err = await client.precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()), timeoutMs: 1_000 }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(RuleEngineUnavailableError);
    expect((err as Error).message).toContain(client.address);
    await expect(client.haltingTools('shop')).rejects.toBeInstanceOf(RuleEngineUnavailableError);
  });
});

describe("the rule-engine service's policy over gRPC", () => {
  it('names no tools in a project without steering: none of its calls can halt', async () => {
    const bus = new MemoryBus({ partitions: 1 });
    const engine = await startRuleEngine({ bus, windows: new MemoryWindowStore<RunWindow>(), topics: makeTopics('t'), rules: () => rules, steering: (p) => p === 'shop' });
    const svc = ruleEngineGrpcService(engine);
    const server = new Server();
    server.addService(svc.service, svc.implementation);
    const client = new RuleEngineClient(`127.0.0.1:${await bindGrpc(server, '127.0.0.1', 0)}`);
    try {
      expect(await client.haltingTools('shop', 'refunds')).toEqual(['issue_refund']);
      expect(await client.haltingTools('blog', 'refunds')).toEqual([]);
    } finally {
      client.close();
      await closeGrpcServer(server);
      await engine.close();
      await bus.close();
    }
  });
});
