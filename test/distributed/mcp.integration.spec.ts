import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger, requireService, until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from '../../packages/neatroots/src/embedded';
import { tempHome, testConfig } from '../../packages/neatroots/src/test-app.test';
import { CLI, Cluster } from './cluster';

/**
 * The MCP tools against the distributed deployment (review, the rule engine, ingest and the api
 * each their own process on the real Kafka, Redis and Postgres), through the MCP SDK's own
 * client as an editor uses them, compared with what the embedded default answers for the same
 * data, sent to both alike with the real TS client: a run of 600 slow tool calls (more than 500
 * findings), a run of 6 spans of 3.6 MB (output and attributes), 300 small runs, and 120 checks
 * of 40 KB saved by people (4.8 MB of checks: more than gRPC's default 4 MiB reply). Every
 * tool's answer equals the embedded one but for times, cursors and states a note's delivery
 * decides; paging through spans and findings gives every item once; the stdio relay
 * (`neatroots mcp`) and the CLI's checks commands answer as over HTTP.
 */
const SUITE = 'MCP against the distributed deployment';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;
const PROJECT = 'shop';
const KEY = `mcp-dist-${Date.now().toString(36)}`;
const SLOW = 600;
const BIG = 6;
const SMALL = 300;
const CHECKS = 120;
const PAD = `# ${'p'.repeat(2_000)}\n`.repeat(20);
/** When the spans sent happened: the same on both sides. */
const T0 = Date.now() - 3_600_000;

interface Side {
  name: string;
  base: string;
  grpc: number;
  client: Client;
}

type Answer = { error?: string; value?: Record<string, unknown>; size: number };

async function tool(side: Side | Client, name: string, args: Record<string, unknown> = {}): Promise<Answer> {
  const client = side instanceof Client ? side : side.client;
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as { isError?: boolean; content: { text: string }[] };
  const text = r.content.map((c) => c.text).join('\n');
  return r.isError ? { error: text, size: text.length } : { value: JSON.parse(text) as Record<string, unknown>, size: text.length };
}

async function rest(side: Side, p: string, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${side.base}${p}`, { ...init, headers: { 'x-api-key': KEY, 'content-type': 'application/json', ...init.headers } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * What may differ between two deployments given the same spans: when things happened (each
 * stored its own), the cursors (they carry those times), and open or active (whether a note
 * reached the agent before its run ended depends on how fast the note came back). A preview's
 * finding is at its run's start (`at_ms`, the run_start's `ts_ms`), which the client stamps
 * when it starts the run.
 */
const VARIES = new Set(['next_cursor', 'spans_next_cursor', 'spans_since', 'state', 'at_ms', 'ts_ms']);
function same(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(same);
  if (v && typeof v === 'object') {
    // A library question's finding (answered by each deployment's classifier): how many times it
    // was raised depends on how the run's spans fell into the windows it was asked about.
    const question = 'answered_by' in v && (v as { kind?: unknown }).kind !== 'rule';
    return Object.fromEntries(Object.entries(v).filter(([k]) => !VARIES.has(k) && !k.endsWith('_at') && !(question && k === 'count')).map(([k, x]) => [k, same(x)]));
  }
  return v;
}

/**
 * An answer with its run page's `spans_since` read, less the findings watermark it carries (`f`:
 * a database snapshot, which moves with any transaction committed between two calls, another
 * service's included): the same stored spans' position, asked twice.
 */
function withoutWatermark<T>(answer: T): T {
  const value = (answer as { value?: { spans_since?: unknown } }).value;
  if (typeof value?.spans_since !== 'string') return answer;
  const { f: _watermark, ...since } = JSON.parse(Buffer.from(value.spans_since, 'base64url').toString('utf8')) as Record<string, unknown>;
  return { ...answer, value: { ...value, spans_since: since } };
}

/** Every page of a listing, from `first` on, by its cursor: the items, and how many pages. */
async function pages(side: Side, name: string, args: Record<string, unknown>, field: string): Promise<{ items: Record<string, unknown>[]; pages: number }> {
  const items: Record<string, unknown>[] = [];
  let cursor: string | null = null;
  let n = 0;
  do {
    const page = await tool(side, name, { ...args, ...(cursor ? { cursor } : {}) });
    expect(page.error).toBeUndefined();
    // Bounded: within what an MCP client takes at the defaults.
    if (args.limit === undefined && args.max_chars === undefined) expect(page.size).toBeLessThan(50_000);
    items.push(...(page.value![field] as Record<string, unknown>[]));
    cursor = page.value!.next_cursor as string | null;
    n++;
  } while (cursor);
  return { items, pages: n };
}

maybe(SUITE, () => {
  let cluster: Cluster;
  let home: string;
  let app: EmbeddedApp;
  let dist: Side;
  let emb: Side;
  const sides = () => [dist, emb];

  async function send(side: Side): Promise<void> {
    const agent = new NeatrootsClient({ address: `127.0.0.1:${side.grpc}`, apiKey: KEY, flushIntervalMs: 20, subscribe: false, maxQueueBytes: 64 * 1024 * 1024 });
    const t0 = T0;
    // Small runs, each calling the same search three times (repeated-tool-call).
    for (let r = 0; r < SMALL; r++) {
      const run = agent.startRun({ run_id: `r-${String(r).padStart(3, '0')}`, workflow: 'mcp' });
      for (let k = 0; k < 3; k++) run.span({ type: 'tool', span_id: `r${r}-${k}`, tool: 'search_kb', input: { q: 'same' }, output: 'ok', start_ms: t0 + k, end_ms: t0 + k + 5 });
      await run.end({ final_output: 'done' });
    }
    await agent.flush();
    // 600 slow calls: the library's slow-tool-call raises a finding on each (the second newest run).
    const slow = agent.startRun({ run_id: 'slow-run', workflow: 'mcp' });
    for (let i = 0; i < SLOW; i++) {
      slow.span({ type: 'tool', span_id: `slow-${i}`, tool: 'search_kb', input: { i }, output: 'ok', start_ms: t0 + 300_000 + i, end_ms: t0 + 300_000 + i + 31_000 });
      if ((i + 1) % 200 === 0) await agent.flush();
    }
    await slow.end({ final_output: 'done' });
    await agent.flush();
    // Spans of 3.6 MB: 900,000 characters of output and of each of three attributes; the newest run.
    const big = agent.startRun({ run_id: 'big-run', workflow: 'mcp' });
    for (let i = 0; i < BIG; i++) {
      big.span({
        type: 'tool', span_id: `big-${i}`, tool: 'fetch_page', input: { i }, output: 'o'.repeat(900_000), start_ms: t0 + 600_000 + i, end_ms: t0 + 600_000 + i + 10,
        attributes: { a: String(i).repeat(900_000), b: 'b'.repeat(900_000), c: 'c'.repeat(900_000) },
      });
      await agent.flush();
    }
    await big.end({ final_output: 'done' });
    await agent.flush();
    await agent.close();
    expect(agent.stats().dropped).toBe(0);
    await until(`${side.name}: every run stored with its findings`, async () => {
      const runs = (await rest(side, `/v1/projects/${PROJECT}/runs?limit=500`)).body.runs as { run_id: string; span_count: number; end_status: string | null }[];
      const slowPage = (await rest(side, `/v1/projects/${PROJECT}/runs/slow-run`)).body as { findings_total?: number };
      const small = runs.filter((r) => r.run_id.startsWith('r-') && r.end_status);
      const findings = (await rest(side, `/v1/projects/${PROJECT}/findings?state=all&limit=500`)).body.findings as unknown[];
      return small.length === SMALL && runs.find((r) => r.run_id === 'big-run')?.span_count === BIG && (slowPage.findings_total ?? 0) >= SLOW && findings.length >= 300 ? true : undefined;
    }, 240_000, 250);
  }

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    await cluster.start('review');
    await Promise.all([cluster.start('question'), cluster.start('rule-engine')]);
    await Promise.all([cluster.start('ingest'), cluster.start('api')]);
    home = tempHome('neatroots-mcp-dist');
    app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
    const connect = async (base: string) => {
      const c = new Client({ name: 'mcp-distributed-test', version: '1.0.0' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
      return c;
    };
    dist = { name: 'distributed', base: `http://127.0.0.1:${cluster.ports.http}`, grpc: cluster.ports.grpc, client: await connect(`http://127.0.0.1:${cluster.ports.http}`) };
    emb = { name: 'embedded', base: `http://127.0.0.1:${app.httpPort}`, grpc: app.ingest.grpcPort, client: await connect(`http://127.0.0.1:${app.httpPort}`) };
    await Promise.all(sides().map(send));
  }, 900_000);

  afterAll(async () => {
    await dist?.client.close();
    await emb?.client.close();
    await app?.close();
    await cluster?.close();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  }, 120_000);

  it('get_run and list_spans: a run\'s spans paged from get_run\'s cursor, each once, as embedded', async () => {
    for (const [runId, total] of [['slow-run', SLOW], ['big-run', BIG]] as const) {
      for (const args of [{}, { limit: 7 }, { limit: 500 }, { limit: 3, max_chars: 100_000 }]) {
        const got: Record<string, unknown[]> = {};
        for (const side of sides()) {
          const { limit, ...rest } = args as { limit?: number; max_chars?: number };
          const run = await tool(side, 'get_run', { run_id: runId, ...(limit ? { spans_limit: limit } : {}), ...rest });
          expect(run.error).toBeUndefined();
          const spans = [...(run.value!.spans as Record<string, unknown>[])];
          let cursor = run.value!.spans_next_cursor as string | null;
          while (cursor) {
            const page = await tool(side, 'list_spans', { run_id: runId, cursor, ...args });
            expect(page.error).toBeUndefined();
            spans.push(...(page.value!.spans as Record<string, unknown>[]));
            cursor = page.value!.next_cursor as string | null;
          }
          expect([side.name, runId, new Set(spans.map((s) => s.span_id)).size]).toEqual([side.name, runId, total]);
          expect(spans).toHaveLength(total);
          got[side.name] = spans;
        }
        expect(same(got.distributed)).toEqual(same(got.embedded));
      }
      // The run page's other parts (findings, problems and their totals) as embedded.
      const [d, e] = await Promise.all(sides().map((s) => tool(s, 'get_run', { run_id: runId })));
      expect(same(d.value)).toEqual(same(e.value));
    }
    // A page stops at 16 MiB of spans, saying so, as embedded: 4 of the 3.6 MB spans.
    const [big, bigEmb] = await Promise.all(sides().map((s) => tool(s, 'get_run', { run_id: 'big-run', spans_limit: 500, max_chars: 100_000 })));
    expect(big.value).toMatchObject({ spans_cut_at_bytes: 16 * 1024 * 1024, spans_next_cursor: expect.any(String) });
    expect(big.value!.spans).toHaveLength(4);
    expect((big.value!.spans as { truncated: Record<string, number> }[])[0].truncated).toEqual({ output: 900_000, attributes: 2_700_022 });
    expect(same(big.value)).toEqual(same(bigEmb.value));
    expect((await tool(dist, 'get_run', { run_id: 'no-such-run' })).error).toBe(`no run no-such-run in project ${PROJECT}`);
  }, 300_000);

  it('list_findings pages to the end, every finding once, as embedded (a run of more than 500, the project\'s)', async () => {
    // The same findings (newest first: the same order but within a run raised at once).
    const byId = (xs: Record<string, unknown>[]) => same([...xs].sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1)));
    const both = async (args: Record<string, unknown>) => {
      const got: Record<string, Record<string, unknown>[]> = {};
      for (const side of sides()) {
        const { items } = await pages(side, 'list_findings', args, 'findings');
        expect(new Set(items.map((f) => f.id)).size).toBe(items.length);
        got[side.name] = items;
      }
      return got;
    };
    // The library's questions are answered by each deployment's classifier, in its own time.
    await until('the same findings on both sides', async () => {
      const got = await both({ state: 'all', limit: 500, include_quiet: true });
      return JSON.stringify(byId(got.distributed)) === JSON.stringify(byId(got.embedded)) ? true : undefined;
    }, 60_000, 1_000).catch(() => undefined);
    for (const args of [{ run_id: 'slow-run' }, { run_id: 'slow-run', limit: 500 }, { state: 'all' }, { state: 'all', limit: 500, include_quiet: true }, {}]) {
      const got = await both(args);
      if (args.run_id) expect(got.distributed.length).toBeGreaterThanOrEqual(SLOW);
      expect(byId(got.distributed)).toEqual(byId(got.embedded));
    }
  }, 300_000);

  it('list_checks, get_check and create_check with 4.8 MB of checks in the project, as embedded; the saved check takes effect', async () => {
    // People's checks of 40 KB each, 4.8 MB in all.
    for (const side of sides()) {
      for (let i = 0; i < CHECKS; i++) {
        const yaml = `${PAD}id: many-${String(i).padStart(3, '0')}\nkind: rule\ntitle: Tool ${i} without lookup\nrule:\n  type: requires_before\n  call: { tool: [tool_${i}] }\n  requires: { tool: [lookup] }\n`;
        const r = await rest(side, `/v1/projects/${PROJECT}/checks`, { method: 'POST', body: JSON.stringify({ yaml, by: 'cli' }) });
        expect([side.name, i, r.status]).toEqual([side.name, i, 200]);
      }
    }
    const listed: Record<string, Record<string, unknown>[]> = {};
    for (const side of sides()) {
      const { items, pages: n } = await pages(side, 'list_checks', {}, 'checks');
      expect(items.filter((c) => String(c.id).startsWith('many-'))).toHaveLength(CHECKS);
      expect(n).toBeGreaterThan(2);
      listed[side.name] = items;
    }
    expect(same(listed.distributed)).toEqual(same(listed.embedded));
    const [d, e] = await Promise.all(sides().map((s) => tool(s, 'get_check', { id: 'many-007' })));
    expect(d.error).toBeUndefined();
    expect((d.value!.check as { yaml: string }).yaml).toContain(PAD);
    expect(same(d.value)).toEqual(same(e.value));
    const agentCheck = 'id: agent-refund-lookup\nkind: rule\ntitle: Refund before lookup\nrule:\n  type: requires_before\n  call: { tool: [issue_refund] }\n  requires: { tool: [lookup_order] }\n';
    const saved = await Promise.all(sides().map((s) => tool(s, 'create_check', { yaml: agentCheck })));
    expect(saved[0].error).toBeUndefined();
    expect(same(saved[0].value)).toEqual(same(saved[1].value));
    expect(saved[0].value).toMatchObject({ created: true, check: { id: 'agent-refund-lookup', source: 'database', origin: 'agent' } });
    // In effect in the rule engine (which reads the deployment's database checks from review).
    const agent = new NeatrootsClient({ address: `127.0.0.1:${dist.grpc}`, apiKey: KEY, flushIntervalMs: 20, subscribe: false });
    try {
      await until('the agent\'s check in effect in the rule engine', async () => {
        const runId = `refund-${Date.now()}`;
        const run = agent.startRun({ run_id: runId, workflow: 'mcp' });
        run.span({ type: 'tool', tool: 'issue_refund', input: { order: 1 }, output: 'ok' });
        await run.end();
        await agent.flush();
        await new Promise((r) => setTimeout(r, 1_500));
        const f = await tool(dist, 'list_findings', { run_id: runId });
        return (f.value?.findings as { check_id: string }[] | undefined)?.some((x) => x.check_id === 'agent-refund-lookup') ? true : undefined;
      }, 60_000, 0);
    } finally {
      await agent.close();
    }
    // What an agent may not do is refused alike.
    const halt = `${agentCheck.replace('agent-refund-lookup', 'agent-halt')}action: halt\n`;
    const refused = await Promise.all(sides().map((s) => tool(s, 'create_check', { yaml: halt })));
    expect(refused[0].error).toMatch(/^invalid_check: .*cannot halt/);
    expect(refused[0]).toEqual(refused[1]);
    expect((await tool(dist, 'create_check', { yaml: 'id: many-001\nkind: rule\ntitle: x\nrule:\n  type: count\n  span: { tool: [x] }\n  at_least: 2\n' })).error).toBe(
      'forbidden: check many-001 was written by a person (the CLI); a coding agent cannot change it',
    );
  }, 300_000);

  it('preview_check answers as embedded', async () => {
    for (const args of [
      { yaml: 'id: p-slow\nkind: rule\ntitle: A slow call\nrule:\n  type: slow\n  span: { type: [tool] }\n  at_least_ms: 30000\n' },
      { yaml: 'id: p-fetch\nkind: rule\ntitle: Fetched twice\nrule:\n  type: count\n  span: { tool: [fetch_page] }\n  at_least: 2\n', runs: 100 },
    ]) {
      const [d, e] = await Promise.all(sides().map((s) => tool(s, 'preview_check', args)));
      expect(d.error).toBeUndefined();
      expect((d.value!.flagged as { run_id: string }[]).map((r) => r.run_id)).toEqual([args.runs ? 'big-run' : 'slow-run']);
      expect(same(d.value)).toEqual(same(e.value));
    }
  }, 180_000);

  it('the stdio relay (neatroots mcp) and the CLI\'s checks commands answer from the distributed api as over HTTP', async () => {
    const stdio = new Client({ name: 'mcp-distributed-stdio', version: '1.0.0' });
    await stdio.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp'], env: { PATH: process.env.PATH ?? '', NEATROOTS_URL: dist.base, NEATROOTS_API_KEY: KEY }, stderr: 'pipe' }));
    try {
      for (const [name, args] of [['get_run', { run_id: 'big-run' }], ['list_checks', { limit: 200 }], ['list_findings', { run_id: 'slow-run', limit: 100 }]] as const) {
        expect(withoutWatermark(await tool(stdio, name, args))).toEqual(withoutWatermark(await tool(dist, name, args)));
      }
    } finally {
      await stdio.close();
    }
    const cli = (...args: string[]) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
        const p = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, NEATROOTS_URL: dist.base, NEATROOTS_API_KEY: KEY, NEATROOTS_PROJECT: PROJECT } });
        let out = '';
        let err = '';
        p.stdout.on('data', (d: Buffer) => (out += d.toString()));
        p.stderr.on('data', (d: Buffer) => (err += d.toString()));
        p.on('close', (code) => resolve({ code, out, err }));
      });
    const file = path.join(cluster.home, 'cli-check.yaml');
    fs.writeFileSync(file, 'id: cli-fetch-twice\nkind: rule\ntitle: Fetched twice\nrule:\n  type: count\n  span: { tool: [fetch_page] }\n  at_least: 2\n');
    const preview = await cli('checks', 'preview', file, '--runs', '100', '--json');
    expect([preview.code, preview.err]).toEqual([0, '']);
    const viaCli = JSON.parse(preview.out) as { runs: unknown; flagged: { run_id: string }[] };
    const viaMcp = (await tool(dist, 'preview_check', { yaml: fs.readFileSync(file, 'utf8'), runs: 100 })).value as { runs: unknown; flagged: { run_id: string }[] };
    expect([viaCli.runs, viaCli.flagged.map((r) => r.run_id)]).toEqual([viaMcp.runs, viaMcp.flagged.map((r) => r.run_id)]);
    expect(viaCli.flagged.map((r) => r.run_id)).toEqual(['big-run']);
    const saved = await cli('checks', 'save', file);
    expect([saved.code, saved.err]).toEqual([0, '']);
    const halted = await cli('checks', 'halt', 'cli-fetch-twice');
    expect([halted.code, halted.err]).toEqual([0, '']);
    expect((await tool(dist, 'get_check', { id: 'cli-fetch-twice' })).value!.check).toMatchObject({ id: 'cli-fetch-twice', action: 'halt', origin: 'cli' });
  }, 180_000);
});
