import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { requireService, until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { Cluster } from './cluster';

/**
 * An MCP session while the distributed review service is away for a minute and a half (a
 * rollout, a crash and its restart): each tool that needs review answers a tool error saying the
 * service cannot answer right now (never a hang, a JSON-RPC error or a lost session),
 * `tools/list` still answers, and once review is back the same session's tools answer again
 * within a few seconds, as the REST API does. grpc-js's connection backoff (up to 120 s) kept
 * the api saying review was away for tens of seconds after it was back. A review that hangs
 * (stopped, not gone) past the 30 s the api keeps a key: each tool call is the tool error
 * review_timeout, never a failed HTTP request (the key's lookup timing out answered the POST 504).
 */
const SUITE = 'MCP while the distributed review service restarts';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;
const PROJECT = 'shop';
const KEY = `mcp-restart-${Date.now().toString(36)}`;
/** How long review is away: long enough for grpc-js's own backoff to grow past half a minute. */
const AWAY_MS = 90_000;
/** How soon after review is ready again the tools must answer. */
const BACK_WITHIN_MS = 8_000;

type Answer = { error?: string; value?: Record<string, unknown> };

maybe(SUITE, () => {
  let cluster: Cluster;
  let client: Client;
  let base: string;

  const tool = async (name: string, args: Record<string, unknown> = {}): Promise<Answer> => {
    const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as { isError?: boolean; content: { text: string }[] };
    const text = r.content.map((c) => c.text).join('\n');
    return r.isError ? { error: text } : { value: JSON.parse(text) as Record<string, unknown> };
  };

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    await cluster.start('review');
    await Promise.all([cluster.start('rule-engine'), cluster.start('ingest'), cluster.start('api')]);
    base = `http://127.0.0.1:${cluster.ports.http}`;
    const agent = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, flushIntervalMs: 20, subscribe: false });
    const run = agent.startRun({ run_id: 'run-1', workflow: 'restart' });
    for (let i = 0; i < 3; i++) run.span({ type: 'tool', span_id: `s${i}`, tool: 'search_kb', input: { q: 'same' }, output: 'ok' });
    await run.end({ final_output: 'done' });
    await agent.close();
    client = new Client({ name: 'mcp-restart-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
    await until('run-1 and its finding', async () => {
      const f = await tool('list_findings', { run_id: 'run-1' });
      return (f.value?.findings as unknown[] | undefined)?.length ? true : undefined;
    }, 120_000, 250);
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await cluster?.close();
  }, 120_000);

  it('says review is away while it is, and answers again within seconds of its return, in the same session', async () => {
    const before = await tool('get_run', { run_id: 'run-1' });
    expect(before.value).toMatchObject({ run: { run_id: 'run-1' }, findings_total: 1 });
    const review = cluster.procs.find((p) => p.target === 'review')!;
    await cluster.stop(review);
    const stopped = Date.now();
    // An agent that keeps asking while review is away: each call a prompt, clear tool error.
    while (Date.now() - stopped < AWAY_MS) {
      for (const [name, args] of [['get_run', { run_id: 'run-1' }], ['list_findings', {}], ['list_checks', {}], ['list_spans', { run_id: 'run-1' }]] as const) {
        const t0 = Date.now();
        const r = await tool(name, args);
        expect([name, r.error]).toEqual([name, expect.stringMatching(/^the review service cannot answer right now \(UNAVAILABLE: .*\); retry shortly$/)]);
        expect(Date.now() - t0).toBeLessThan(15_000);
      }
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('get_run');
      const rest = await fetch(`${base}/v1/projects/${PROJECT}/runs/run-1`, { headers: { 'x-api-key': KEY } });
      expect([rest.status, rest.headers.get('retry-after')]).toEqual([503, '5']);
      await new Promise((r) => setTimeout(r, 2_000));
    }
    await cluster.start('review');
    const ready = Date.now();
    let last: Answer = {};
    while (Date.now() - ready < 120_000) {
      last = await tool('get_run', { run_id: 'run-1' });
      if (!last.error) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const tookMs = Date.now() - ready;
    expect([tookMs < BACK_WITHIN_MS, tookMs, last.error]).toEqual([true, tookMs, undefined]);
    // The same answer (spans_since, a cursor for later spans, carries the database's transaction ids).
    const { spans_since: _a, ...now } = last.value!;
    const { spans_since: _b, ...then } = before.value!;
    expect(now).toEqual(then);
    expect((await tool('list_findings', { run_id: 'run-1' })).value!.findings).toHaveLength(1);
  }, 300_000);

  it('says review is too slow while it hangs, past the 30 s the api keeps a key, and answers again once it does', async () => {
    const before = await tool('list_findings', { run_id: 'run-1' });
    expect(before.error).toBeUndefined();
    const review = cluster.procs.find((p) => p.target === 'review')!;
    // Hung (a stalled process, a database lock): calls reach it and get no answer.
    review.proc.kill('SIGSTOP');
    try {
      const hung = Date.now();
      // Past KEY_GRANT_MS (30 s): the api asks review for the key again, and that times out too.
      while (Date.now() - hung < 45_000) {
        const r = await tool('list_findings', { run_id: 'run-1' });
        expect(r.error).toMatch(/^the review service took more than 10 s for this request \(DEADLINE_EXCEEDED: .*\); the same request asked again is likely as slow: ask for less where the call takes a limit$/);
      }
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('list_findings');
    } finally {
      review.proc.kill('SIGCONT');
    }
    expect(await tool('list_findings', { run_id: 'run-1' })).toEqual(before);
  }, 180_000);
});
