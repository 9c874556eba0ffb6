import * as fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * What the MCP tools answer stays within what an MCP client takes (Claude Code caps a tool's
 * answer at about 25,000 tokens): a run of 200 spans of 200 KB, and 100 checks of 40 KB, each
 * answered a bounded page at a time, the rest reachable by cursor or by id. Calls an agent
 * gets wrong are answered saying what is wrong; the answers equal the REST API's for the
 * same data. Against a real embedded neatroots, through the MCP SDK's own client.
 */
const KEY = 'mcp-bounds-key';
const PROJECT = 'shop';
const BIG_SPANS = 200;
const BIG_OUTPUT = 200_000;
/** A tool's answer, in characters, that stays well within an MCP client's cap. */
const BOUND = 40_000;

const rule = (id: string, call: string, requires: string, comment = '') => `${comment}id: ${id}
kind: rule
title: ${call} without ${requires}
rule:
  type: requires_before
  call: { tool: [${call}] }
  requires: { tool: [${requires}] }
`;

type CheckRow = { id: string; source: string; yaml?: string } & Record<string, unknown>;
/** list_checks' order: by id, then source, in code units. */
const byIdThenSource = (a: CheckRow, b: CheckRow) => (a.id !== b.id ? (a.id < b.id ? -1 : 1) : a.source === b.source ? 0 : a.source < b.source ? -1 : 1);

let home: string;
let app: EmbeddedApp;
let base: string;
let client: Client;

async function rest(path: string, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, { ...init, headers: { 'x-api-key': KEY, 'content-type': 'application/json', ...init.headers } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Asks `probe` again until it answers something (polling the api: what it waits for has no event of its own). */
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Answer {
  error?: string;
  value?: Record<string, unknown>;
  /** The answer's text as the client got it. */
  size: number;
}

async function tool(name: string, args: Record<string, unknown> = {}): Promise<Answer> {
  const r = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { text: string }[] };
  const text = r.content.map((c) => c.text).join('\n');
  return r.isError ? { error: text, size: text.length } : { value: JSON.parse(text) as Record<string, unknown>, size: text.length };
}

/** Sends a run through the SDK and waits until the api has all of it. */
async function sendRun(runId: string, spans: { tool: string; output?: string; start_ms?: number; end_ms?: number }[], flushEvery = 20): Promise<void> {
  const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
  const run = agent.startRun({ run_id: runId, workflow: 'bounds' });
  for (let i = 0; i < spans.length; i++) {
    const { tool, output, ...times } = spans[i];
    run.span({ type: 'tool', tool, input: { i }, output: output ?? 'ok', ...times });
    if ((i + 1) % flushEvery === 0) await agent.flush();
  }
  await run.end({ final_output: 'done' });
  await agent.flush();
  await agent.close();
  await until(`run ${runId}`, async () => {
    const r = await rest(`/v1/projects/${PROJECT}/runs/${runId}`);
    const got = r.body.run as { end_status: string | null; span_count: number } | undefined;
    return got?.end_status && got.span_count === spans.length ? true : undefined;
  });
}

/** Waits until the run's findings (quiet ones too) number `n`. */
async function findingsOf(runId: string, n: number): Promise<{ id: string; quiet: boolean }[]> {
  return until(`${n} findings of ${runId}`, async () => {
    const r = await rest(`/v1/projects/${PROJECT}/findings?run_id=${runId}&include_quiet=true`);
    const f = r.body.findings as { id: string; quiet: boolean }[];
    return f.length === n ? f : undefined;
  });
}

beforeAll(async () => {
  home = tempHome('neatroots-mcp-bounds');
  const config = testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
  app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
  base = `http://127.0.0.1:${app.httpPort}`;
  client = new Client({ name: 'mcp-bounds-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
}, 120_000);

afterAll(async () => {
  await client?.close();
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('a run of 200 spans of 200 KB', () => {
  beforeAll(async () => {
    await sendRun('big-run', Array.from({ length: BIG_SPANS }, () => ({ tool: 'search_kb', output: 'x'.repeat(BIG_OUTPUT) })));
  }, 300_000);

  it('get_run answers its first spans, each long field cut and saying how long it was, within a bound', async () => {
    const run = await tool('get_run', { run_id: 'big-run' });
    expect(run.error).toBeUndefined();
    expect(run.size).toBeLessThan(BOUND);
    const spans = run.value!.spans as { output: string; truncated?: Record<string, number> }[];
    expect(spans).toHaveLength(20);
    for (const s of spans) {
      expect(s.output).toBe('x'.repeat(500));
      expect(s.truncated).toEqual({ output: BIG_OUTPUT });
    }
    expect(run.value!.spans_next_cursor).toEqual(expect.any(String));

    const few = await tool('get_run', { run_id: 'big-run', spans_limit: 3, max_chars: 10 });
    expect(few.value!.spans).toEqual(Array.from({ length: 3 }, () => expect.objectContaining({ output: 'x'.repeat(10), truncated: { output: BIG_OUTPUT } })));
    expect((await tool('get_run', { run_id: 'big-run', spans_limit: 501 })).error).toBe('spans_limit must be an integer from 1 to 500');
  }, 60_000);

  it('list_spans pages through every span once from get_run\'s cursor, each page within the bound', async () => {
    const run = await tool('get_run', { run_id: 'big-run' });
    const ids = (run.value!.spans as { span_id: string }[]).map((s) => s.span_id);
    let cursor = run.value!.spans_next_cursor as string | null;
    let pages = 1;
    while (cursor) {
      const page = await tool('list_spans', { run_id: 'big-run', cursor });
      expect(page.error).toBeUndefined();
      expect(page.size).toBeLessThan(BOUND);
      ids.push(...(page.value!.spans as { span_id: string }[]).map((s) => s.span_id));
      cursor = page.value!.next_cursor as string | null;
      pages++;
    }
    expect(pages).toBe(BIG_SPANS / 20);
    expect(ids).toHaveLength(BIG_SPANS);
    expect(new Set(ids).size).toBe(BIG_SPANS);
    // The same order as the REST API's pages (40 MB of spans: cut at 16 MiB a page, and said so).
    const viaRest: string[] = [];
    let restCursor: string | null = null;
    let restPages = 0;
    do {
      const page = await rest(`/v1/projects/${PROJECT}/runs/big-run/spans?limit=${BIG_SPANS}${restCursor ? `&cursor=${encodeURIComponent(restCursor)}` : ''}`);
      viaRest.push(...(page.body.spans as { span_id: string }[]).map((s) => s.span_id));
      restCursor = page.body.next_cursor as string | null;
      if (restCursor) expect(page.body.cut_at_bytes).toBe(16 * 1024 * 1024);
      restPages++;
    } while (restCursor);
    expect(restPages).toBe(3);
    expect(ids).toEqual(viaRest);
    // Without a cursor, the first page: get_run's spans.
    const first = await tool('list_spans', { run_id: 'big-run', limit: 20 });
    expect(first.value!.spans).toEqual(run.value!.spans);
    expect((await tool('list_spans', { run_id: 'no-such-run' })).error).toBe(`no run no-such-run in project ${PROJECT}`);
  }, 120_000);
});

describe('a run of 20 model calls naming a model of 150,000 characters', () => {
  const MODEL = 'm'.repeat(150_000);

  beforeAll(async () => {
    const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
    const run = agent.startRun({ run_id: 'model-run', workflow: 'bounds' });
    for (let i = 0; i < 20; i++) {
      run.span({ type: 'llm', name: 'chat', model: MODEL, input: { i }, output: 'ok' });
      if ((i + 1) % 5 === 0) await agent.flush();
    }
    await run.end({ final_output: 'done' });
    await agent.flush();
    await agent.close();
    await until('run model-run', async () => {
      const got = (await rest(`/v1/projects/${PROJECT}/runs/model-run`)).body.run as { end_status: string | null; span_count: number } | undefined;
      return got?.end_status && got.span_count === 20 ? true : undefined;
    });
  }, 120_000);

  it('list_spans and get_run cut a span\'s model as its other long fields, saying how long it was', async () => {
    const page = await tool('list_spans', { run_id: 'model-run', limit: 20, max_chars: 1 });
    expect(page.error).toBeUndefined();
    expect(page.size).toBeLessThan(BOUND);
    expect(page.value!.spans).toEqual(Array.from({ length: 20 }, () => expect.objectContaining({ model: 'm', truncated: expect.objectContaining({ model: MODEL.length }) })));
    const run = await tool('get_run', { run_id: 'model-run' });
    expect(run.size).toBeLessThan(BOUND);
    expect((run.value!.spans as { model: string }[]).every((s) => s.model === MODEL.slice(0, 500))).toBe(true);
    // REST has it whole.
    expect(((await rest(`/v1/projects/${PROJECT}/runs/model-run/spans?limit=1`)).body.spans as { model: string }[])[0].model).toBe(MODEL);
  }, 60_000);
});

describe('100 checks of 40 KB', () => {
  const PAD = `# ${'p'.repeat(2_000)}\n`.repeat(20);

  beforeAll(async () => {
    for (let i = 0; i < 100; i++) {
      const r = await rest(`/v1/projects/${PROJECT}/checks`, { method: 'POST', body: JSON.stringify({ yaml: rule(`many-${i}`, `tool_${i}`, 'lookup', PAD), by: 'cli' }) });
      expect(r.status).toBe(200);
    }
  }, 300_000);

  it('list_checks lists them without their YAML, within a bound; get_check has the YAML', async () => {
    const listed = await tool('list_checks', { limit: 200 });
    const checks = listed.value!.checks as Record<string, unknown>[];
    expect(checks.filter((c) => String(c.id).startsWith('many-'))).toHaveLength(100);
    expect(checks.every((c) => !('yaml' in c))).toBe(true);
    expect(listed.size).toBeLessThan(BOUND);
    // The rest as REST lists it, by id.
    const viaRest = (await rest(`/v1/projects/${PROJECT}/checks`)).body.checks as CheckRow[];
    expect(checks).toEqual(viaRest.sort(byIdThenSource).map(({ yaml: _yaml, ...c }) => c));
    expect(listed.value).toMatchObject({ next_cursor: null, total: viaRest.length });

    const one = await tool('get_check', { id: 'many-7' });
    expect(one.value).toEqual((await rest(`/v1/projects/${PROJECT}/checks/many-7`)).body);
    const yaml = (one.value!.check as { yaml: string }).yaml;
    expect(yaml).toContain(PAD);
    expect(yaml).toMatch(/^id: many-7$/m);
    expect((await tool('get_check', { id: 'nope' })).error).toBe(`no check nope in project ${PROJECT}`);
  }, 60_000);
});

describe('calls an agent gets wrong', () => {
  async function raw(params: unknown): Promise<{ status: number; body: { id?: unknown; error?: { code: number; message: string } } }> {
    const res = await fetch(`${base}/v1/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params }),
    });
    return { status: res.status, body: (await res.json()) as never };
  }

  it('a malformed tools/call is answered -32602 Invalid params, in one line', async () => {
    expect(await raw({})).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 9, error: { code: -32602, message: expect.stringMatching(/^tools\/call params\.name must be the name of a tool \(create_check, .*\), got nothing$/) } },
    });
    expect((await raw({ name: 'get_run', arguments: ['x'] })).body.error).toEqual({
      code: -32602,
      message: "tools/call params.arguments must be an object of the tool's arguments by name, got an array",
    });
    expect((await raw({ name: 'get_run', arguments: ['x'] })).body.error!.message).not.toContain('\n');
    expect((await raw({ name: 'get_run', arguments: 'run_id: x' })).body.error).toEqual({
      code: -32602,
      message: "tools/call params.arguments must be an object of the tool's arguments by name, got a string",
    });
  });

  it('a wrong type is named as such, and null is an argument left out', async () => {
    expect((await tool('create_check', { check: 'id: x' })).error).toBe("check must be an object (the check's fields), got a string; give YAML text as yaml");
    expect((await tool('create_check', { yaml: 'id: x', check: null })).error).toMatch(/^invalid_check: /);
    expect((await tool('list_findings', { state: 5 })).error).toBe('state must be one of open, active, resolved, dismissed, all, got a number');
    expect((await tool('list_findings', { state: 'closed' })).error).toBe('state must be one of open, active, resolved, dismissed, all, got "closed"');
    expect((await tool('get_run', { run_id: 7 })).error).toBe('run_id must be a non-empty string, got a number');
    expect((await tool('preview_check', { yaml: rule('nulls', 'a', 'b'), check: null, runs: null, model_calls: null })).error).toBeUndefined();
    expect((await tool('list_findings', { state: null, run_id: null, include_quiet: null, limit: null, cursor: null })).error).toBeUndefined();
    expect((await tool('list_findings', { include_quiet: 'yes' })).error).toBe('include_quiet must be true or false, got a string');
  });
});

describe('findings and runs as the REST API answers them', () => {
  beforeAll(async () => {
    const r = await rest(`/v1/projects/${PROJECT}/checks`, { method: 'POST', body: JSON.stringify({ yaml: rule('void-needs-lookup', 'void_order', 'lookup_order'), by: 'cli' }) });
    expect(r.status).toBe(200);
  });

  it('list_findings and get_run equal GET .../findings and GET .../runs/{run_id}', async () => {
    await sendRun('parity-run', [{ tool: 'void_order' }, { tool: 'lookup_order' }]);
    expect(await findingsOf('parity-run', 1)).toEqual([expect.objectContaining({ quiet: false })]);
    const run = await tool('get_run', { run_id: 'parity-run' });
    // The run page's findings_scope says what a live look carries; get_run is no look (it gives its first findings and their total).
    const { findings_scope: scope, ...page } = (await rest(`/v1/projects/${PROJECT}/runs/parity-run`)).body;
    expect(scope).toBe('newest');
    expect(run.value).toEqual({ ...page, findings_total: 1, problems_total: 1, not_checked_total: 0 });
    expect(run.value!.findings).toEqual([expect.objectContaining({ check_id: 'void-needs-lookup' })]);
    expect((await tool('list_findings', { run_id: 'parity-run' })).value).toEqual((await rest(`/v1/projects/${PROJECT}/findings?run_id=parity-run`)).body);
    const open = await tool('list_findings', { limit: 50 });
    expect(open.value).toEqual((await rest(`/v1/projects/${PROJECT}/findings?limit=50`)).body);
    expect(open.value!.findings).toEqual(expect.arrayContaining([expect.objectContaining({ run_id: 'parity-run' })]));
  }, 120_000);

  it('list_findings include_quiet: a quiet check\'s finding is listed with it, not without', async () => {
    // Dismissed 3 times in the project, the check goes quiet: its next finding is quiet.
    for (const runId of ['quiet-1', 'quiet-2', 'quiet-3']) {
      await sendRun(runId, [{ tool: 'void_order' }]);
      const [f] = await findingsOf(runId, 1);
      expect((await rest(`/v1/projects/${PROJECT}/findings/${f.id}/dismiss`, { method: 'POST', body: '{}' })).status).toBe(200);
    }
    await sendRun('quiet-4', [{ tool: 'void_order' }]);
    expect(await findingsOf('quiet-4', 1)).toEqual([expect.objectContaining({ quiet: true })]);

    expect((await tool('list_findings', { run_id: 'quiet-4' })).value!.findings).toEqual([]);
    const quiet = await tool('list_findings', { run_id: 'quiet-4', include_quiet: true });
    expect(quiet.value!.findings).toEqual([expect.objectContaining({ run_id: 'quiet-4', check_id: 'void-needs-lookup', quiet: true })]);
    expect(quiet.value).toEqual((await rest(`/v1/projects/${PROJECT}/findings?run_id=quiet-4&include_quiet=true`)).body);
  }, 120_000);
});

describe('a run of 2,000 slow tool calls (the library\'s slow-tool-call raises a finding on each)', () => {
  const SLOW = 2_000;
  const slowCalls = (n: number) => {
    const t0 = Date.now() - 3_600_000;
    return Array.from({ length: n }, (_, i) => ({ tool: 'search_kb', start_ms: t0 + i, end_ms: t0 + i + 31_000 }));
  };
  /** Waits until each of the run's slow calls has its finding of both checks (stored: the run page carries its newest 500 only). */
  const slowFindings = (runId: string, n: number) =>
    until(`the findings of ${runId}`, async () => {
      const rows = await app.db.query<{ check_id: string; n: unknown }>(
        'SELECT check_id, count(*) AS n FROM findings WHERE project = $1 AND run_id = $2 GROUP BY check_id', [PROJECT, runId]);
      const of = (check: string) => Number(rows.rows.find((r) => r.check_id === check)?.n ?? 0);
      return of('slow-tool-call') === n && of('slow-grouped') === n ? true : undefined;
    }, 240_000);

  beforeAll(async () => {
    // A slow rule of a group as well: all its findings in a run are one problem, the others related.
    const grouped = 'id: slow-grouped\nkind: rule\ntitle: A slow call, grouped\ngroup: slow-calls\nrule:\n  type: slow\n  span: { type: [tool] }\n  at_least_ms: 30000\n';
    expect((await rest(`/v1/projects/${PROJECT}/checks`, { method: 'POST', body: JSON.stringify({ yaml: grouped, by: 'cli' }) })).status).toBe(200);
    await sendRun('slow-run', slowCalls(SLOW), 200);
    await slowFindings('slow-run', SLOW);
    await sendRun('grouped-run', slowCalls(8));
    await slowFindings('grouped-run', 8);
  }, 300_000);

  it('get_run gives the first 10 findings, problems and questions not checked with how many there are, within a bound', async () => {
    // REST's run page carries the newest 500 and how many there are.
    const page = (await rest(`/v1/projects/${PROJECT}/runs/slow-run`)).body as { findings: { id: string }[]; problems: { id: string }[]; findings_total: number };
    expect(page.findings).toHaveLength(500);
    expect(page.findings_total).toBeGreaterThan(2 * SLOW);
    const run = await tool('get_run', { run_id: 'slow-run' });
    expect(run.error).toBeUndefined();
    expect(run.size).toBeLessThan(BOUND);
    expect(run.value).toMatchObject({
      findings_total: page.findings_total,
      problems_total: page.problems.length,
      not_checked_total: 0,
      findings_more: 'the first 10 are here: list_findings with run_id "slow-run" pages through the run\'s problems (include_quiet: true for quiet findings too)',
    });
    // The first ones, as REST gives them.
    expect((run.value!.findings as { id: string }[]).map((f) => f.id)).toEqual(page.findings.slice(0, 10).map((f) => f.id));
    expect((run.value!.problems as { id: string }[]).map((p) => p.id)).toEqual(page.problems.slice(0, 10).map((p) => p.id));
    expect(run.value!.not_checked).toEqual([]);
    // Asked for less, less: the findings are bounded whatever spans_limit and max_chars say.
    const least = await tool('get_run', { run_id: 'slow-run', spans_limit: 1, max_chars: 1 });
    expect(least.size).toBeLessThan(run.size);
    expect(least.value).toMatchObject({ findings_total: page.findings_total, problems_total: page.problems.length });
    // list_findings pages through them.
    const listed = await tool('list_findings', { run_id: 'slow-run', limit: 500 });
    expect([(listed.value!.findings as unknown[]).length, listed.value!.next_cursor]).toEqual([500, expect.any(String)]);
  }, 60_000);

  it('preview_check lists each flagged run\'s first 3 findings with how many there are, their long fields cut, within a bound', async () => {
    const guidance = 'Narrow the search. '.repeat(60);
    const slow = `id: slow-preview\nkind: rule\ntitle: A slow call\nguidance: ${guidance}\nrule:\n  type: slow\n  span: { type: [tool] }\n  at_least_ms: 30000\n`;
    const preview = await tool('preview_check', { yaml: slow });
    expect(preview.error).toBeUndefined();
    expect(preview.size).toBeLessThan(BOUND);
    type Flagged = { run_id: string; findings: { span_ids: string[]; guidance: string; truncated?: Record<string, number> }[]; findings_total: number };
    const flagged = preview.value!.flagged as Flagged[];
    expect(preview.value!.runs).toMatchObject({ flagged: flagged.length });
    const byRun = Object.fromEntries(flagged.map((r) => [r.run_id, r]));
    expect(byRun['slow-run']).toMatchObject({ findings_total: SLOW });
    expect(byRun['grouped-run']).toMatchObject({ findings_total: 8 });
    for (const r of [byRun['slow-run'], byRun['grouped-run']]) {
      expect(r.findings).toHaveLength(3);
      for (const f of r.findings) {
        expect(f.guidance).toBe(guidance.trim().slice(0, 500));
        expect(f.truncated).toEqual({ guidance: guidance.trim().length });
      }
    }
  }, 120_000);

  it('a problem gives its first 5 related findings and how many it has, in get_run and list_findings', async () => {
    type Listed = { id: string; check_id: string; related: { id: string }[]; truncated?: Record<string, number> };
    const page = (await rest(`/v1/projects/${PROJECT}/runs/grouped-run`)).body as { problems: Listed[] };
    const group = page.problems.find((p) => p.check_id === 'slow-grouped')!;
    expect(group.related).toHaveLength(7);
    const listed = await tool('list_findings', { run_id: 'grouped-run' });
    const inList = (listed.value!.findings as Listed[]).find((p) => p.id === group.id)!;
    expect(inList.related.map((f) => f.id)).toEqual(group.related.slice(0, 5).map((f) => f.id));
    expect(inList.truncated).toEqual({ related: 7 });
    const run = await tool('get_run', { run_id: 'grouped-run' });
    expect((run.value!.problems as Listed[]).find((p) => p.id === group.id)).toEqual(inList);
    expect(run.value).toMatchObject({ findings_total: 16, problems_total: 9 });
    // Another problem, with no related findings, is as it was.
    expect((listed.value!.findings as Listed[]).find((p) => p.check_id === 'slow-tool-call')).not.toHaveProperty('truncated');
  }, 60_000);
});

describe('1,000 checks saved through the API', () => {
  const N = 1_000;

  beforeAll(async () => {
    for (let i = 0; i < N; i++) {
      const id = `people-check-${String(i).padStart(5, '0')}-${'x'.repeat(40)}`;
      const yaml = `id: ${id}\nkind: rule\ntitle: ${`Title of a person check number ${i} `.padEnd(200, 'y')}\nrule:\n  type: count\n  span: { tool: [never_called_tool_${i}] }\n  at_least: 5\n`;
      expect((await rest(`/v1/projects/${PROJECT}/checks`, { method: 'POST', body: JSON.stringify({ yaml, by: 'cli' }) })).status).toBe(200);
    }
  }, 600_000);

  it('list_checks pages through them by id, 50 a page unless asked, within the bound; source narrows the list', async () => {
    const viaRest = ((await rest(`/v1/projects/${PROJECT}/checks`)).body.checks as CheckRow[]).sort(byIdThenSource).map(({ yaml: _yaml, ...c }) => c);
    expect(viaRest.length).toBeGreaterThan(N);
    const first = await tool('list_checks');
    expect(first.error).toBeUndefined();
    expect(first.size).toBeLessThan(BOUND);
    expect(first.value).toMatchObject({ total: viaRest.length, next_cursor: expect.any(String) });
    expect(first.value!.checks).toEqual(viaRest.slice(0, 50));
    // Every one once, in order, 200 a page.
    const seen: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page = await tool('list_checks', { limit: 200, cursor });
      expect(page.error).toBeUndefined();
      seen.push(...(page.value!.checks as unknown[]));
      cursor = page.value!.next_cursor as string | null;
    } while (cursor);
    expect(seen).toEqual(viaRest);
    // source: the database checks only.
    const saved = await tool('list_checks', { source: 'database', limit: 5 });
    expect(saved.value!.checks).toEqual(viaRest.filter((c) => c.source === 'database').slice(0, 5));
    expect(saved.value!.total).toBe(viaRest.filter((c) => c.source === 'database').length);
    const library = await tool('list_checks', { source: 'library', limit: 200 });
    expect(library.value!.checks).toEqual(viaRest.filter((c) => c.source === 'library'));
    expect(library.value!.next_cursor).toBeNull();
    // Calls it refuses.
    expect((await tool('list_checks', { limit: 201 })).error).toBe('limit must be an integer from 1 to 200');
    expect((await tool('list_checks', { cursor: 'nonsense' })).error).toBe('cursor is not one list_checks returned');
    expect((await tool('list_checks', { source: 'files' })).error).toBe('source must be one of library, user, project, database, got "files"');
  }, 120_000);
});
