import { Server } from '@grpc/grpc-js';
import { compileRuleSet, parseCheck, RuleEngine, type RunWindow } from '@neatroots/checks';
import { MemoryWindowStore } from '@neatroots/platform';
import { bindGrpc, closeGrpcServer } from '@neatroots/proto';
import type { Span } from '@neatroots/spans';
import { RuleEngineClient, RuleEngineUnavailableError, ruleEngineGrpcService } from './grpc';
import { haltingTools, Prechecker } from './precheck';

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

  beforeEach(async () => {
    windows = new MemoryWindowStore<RunWindow>();
    const prechecker = new Prechecker({ windows, rules: () => rules, steering: () => true });
    const svc = ruleEngineGrpcService({ precheck: (r) => prechecker.precheck(r), haltingTools: (p, w) => haltingTools(rules, p, w) });
    server = new Server();
    server.addService(svc.service, svc.implementation);
    const port = await bindGrpc(server, '127.0.0.1', 0);
    client = new RuleEngineClient(`127.0.0.1:${port}`);
  });

  afterEach(async () => {
    client.close();
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
    // The caller's deadline comes first: the engine gives up just before it, with its reason.
    const early = await client.precheck({ project: 'shop', span: span('s9', 'issue_refund', Date.now()), knownSpans: 4, timeoutMs: 5_000, deadline: Date.now() + 100 }).catch((e: Error) => e);
    expect(early).toMatchObject({ name: 'PrecheckTimeoutError', message: expect.stringContaining('saw 0 of its 4 exported spans within') });
    expect(Number(/within (\d+) ms/.exec((early as Error).message)?.[1])).toBeLessThan(100);
  });

  it('says the engine is unreachable when nothing listens (ingest answers UNAVAILABLE)', async () => {
    await closeGrpcServer(server);
    const err = await client.precheck({ project: 'shop', span: span('s2', 'issue_refund', Date.now()), timeoutMs: 1_000 }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(RuleEngineUnavailableError);
    expect((err as Error).message).toContain(client.address);
    await expect(client.haltingTools('shop')).rejects.toBeInstanceOf(RuleEngineUnavailableError);
  });
});
