import * as fs from 'node:fs';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * Saving one check through the api costs one check, however many the project has: the check
 * set parses the saved check and compiles its rule, and keeps every other check as it was
 * (before, each save parsed and compiled every check, so the n-th save cost O(n) and a project
 * of 1,000 checks took up to 600 ms a save). What a save did is read from the check set's own
 * counts, not from the time it took. The checks kept from earlier loads still act, a `match`
 * one included; a bad pattern is still refused with nothing changed; a delete compiles nothing.
 */
const KEY = 'check-saves-key';
const PROJECT = 'shop';
const OTHER = 'other';
const OTHER_KEY = 'check-saves-other-key';
const N = 200;

const checkYaml = (i: number, pattern = `secret-${i}-[0-9]{4}`) =>
  i % 4 === 0
    ? `id: save-${i}\nkind: rule\ntitle: secret ${i}\nrule:\n  type: match\n  span: { tool: [tool_${i}] }\n  pattern: '${pattern}'\n  in: [output]\n`
    : `id: save-${i}\nkind: rule\ntitle: tool ${i} without lookup\nrule:\n  type: requires_before\n  call: { tool: [tool_${i}] }\n  requires: { tool: [lookup] }\n`;

// A check of yours (every project) that a check saved in the project overrides there.
const leakYaml = (pattern: string) => `id: leak\nkind: rule\ntitle: leak\nrule:\n  type: match\n  span: { tool: [leaky] }\n  pattern: '${pattern}'\n  in: [output]\n`;

let home: string;
let app: EmbeddedApp;
let base: string;

async function rest(method: string, p: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** What one call did to the check set: its parses and compiled rules. */
async function work(call: () => Promise<unknown>): Promise<{ parses: number; compiled_rules: number }> {
  const before = app.checkWork();
  await call();
  const after = app.checkWork();
  return { parses: after.parses - before.parses, compiled_rules: after.compiled_rules - before.compiled_rules };
}

beforeAll(async () => {
  home = tempHome('neatroots-check-saves', { 'leak.yaml': leakYaml('user-leak-[0-9]+') });
  app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${OTHER}=${OTHER_KEY}` }), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
  base = `http://127.0.0.1:${app.httpPort}`;
  for (let i = 0; i < N; i++) {
    const r = await rest('POST', `/v1/projects/${PROJECT}/checks`, { yaml: checkYaml(i), by: 'cli' });
    expect([i, r.status]).toEqual([i, 200]);
  }
}, 300_000);

afterAll(async () => {
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

const ids = () => app.checks().checks.filter((c) => c.source === 'database').map((c) => c.id);

describe(`saving a check beside ${N} others`, () => {
  it('a new check: one parse and one rule compiled, and it is in effect', async () => {
    expect(await work(() => rest('POST', `/v1/projects/${PROJECT}/checks`, { yaml: checkYaml(N), by: 'cli' }))).toEqual({ parses: 1, compiled_rules: 1 });
    expect(ids()).toHaveLength(N + 1);
    expect(app.checks().checks.find((c) => c.id === `save-${N}`)).toBeDefined();
  }, 60_000);

  it('a changed check: its new version parsed and compiled, alone', async () => {
    const changed = checkYaml(8, 'changed-[0-9]{3}');
    const r = await work(() => rest('PUT', `/v1/projects/${PROJECT}/checks/save-8`, { yaml: changed, by: 'cli' }));
    expect(r).toEqual({ parses: 1, compiled_rules: 1 });
    const rule = app.checks().checks.find((c) => c.id === 'save-8') as { rule: { pattern: string } };
    expect(rule.rule.pattern).toBe('changed-[0-9]{3}');
  }, 60_000);

  it('a bad pattern: refused saying why, nothing parsed again, compiled or changed', async () => {
    const before = ids();
    let answer: { status: number; body: Record<string, unknown> } | undefined;
    expect(await work(async () => (answer = await rest('POST', `/v1/projects/${PROJECT}/checks`, { yaml: checkYaml(N + 4, '(unclosed'), by: 'cli' })))).toEqual({ parses: 0, compiled_rules: 0 });
    expect(answer!.status).toBe(400);
    expect(JSON.stringify(answer!.body)).toMatch(/pattern/);
    expect(ids()).toEqual(before);
  }, 60_000);

  it('a delete: nothing parsed or compiled, the check gone', async () => {
    expect(await work(() => rest('DELETE', `/v1/projects/${PROJECT}/checks/save-3`))).toEqual({ parses: 0, compiled_rules: 0 });
    expect(ids()).not.toContain('save-3');
    expect(ids()).toHaveLength(N);
  }, 60_000);

  it('the checks kept from earlier loads still act: a match check saved first, and the changed one', async () => {
    const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
    const run = agent.startRun({ run_id: 'kept-checks', workflow: 'saves' });
    run.span({ type: 'tool', tool: 'tool_0', input: { q: 1 }, output: 'here is secret-0-1234' });
    run.span({ type: 'tool', tool: 'tool_8', input: { q: 2 }, output: 'changed-123' });
    run.span({ type: 'tool', tool: 'tool_4', input: { q: 3 }, output: 'nothing secret here' });
    await run.end({ final_output: 'done' });
    await agent.flush();
    await agent.close();
    const deadline = Date.now() + 60_000;
    let flagged: string[] = [];
    while (Date.now() < deadline) {
      const f = await rest('GET', `/v1/projects/${PROJECT}/findings?run_id=kept-checks&state=all`);
      flagged = ((f.body.findings ?? []) as { check_id: string }[]).map((x) => x.check_id).filter((id) => id.startsWith('save-')).sort();
      if (flagged.length >= 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(flagged).toEqual(['save-0', 'save-8']);
  }, 90_000);
});

/** The spans (by their output) leak flagged in a run of `leaky` spans with these outputs, in a project. */
async function leakFindings(project: string, key: string, runId: string, outputs: string[]): Promise<string[]> {
  const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: key, flushIntervalMs: 20 });
  const run = agent.startRun({ run_id: runId, workflow: 'saves' });
  const spans = new Map(outputs.map((output, q) => [run.span({ type: 'tool', tool: 'leaky', input: { q }, output }), output]));
  await run.end({ final_output: 'done' });
  await agent.flush();
  await agent.close();
  const deadline = Date.now() + 60_000;
  let found: string[] = [];
  while (Date.now() < deadline) {
    const res = await fetch(`${base}/v1/projects/${project}/findings?run_id=${runId}&state=all`, { headers: { 'x-api-key': key } });
    found = (((await res.json()) as { findings?: { check_id: string }[] }).findings ?? []).filter((x) => x.check_id === 'leak').map((x) => JSON.stringify(x));
    if (found.length) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 300)); // a second finding would be here by now
  const res = await fetch(`${base}/v1/projects/${project}/findings?run_id=${runId}&state=all`, { headers: { 'x-api-key': key } });
  return (((await res.json()) as { findings?: { check_id: string; span_ids: string[] }[] }).findings ?? [])
    .filter((x) => x.check_id === 'leak')
    .flatMap((x) => x.span_ids.map((id) => spans.get(id) ?? id));
}

/**
 * A check saved in the project with the id of one of yours overrides it there: yours stays in
 * effect elsewhere, narrowed (applies_to.not_project). Its narrowed version is kept from load
 * to load while neither changed, so its rule is not compiled again at every save; it is when
 * the override or your check changes, and the findings follow the new version.
 */
describe('saving beside a check that overrides one of yours', () => {
  const leaks = () => app.checks().checks.filter((c) => c.id === 'leak') as unknown as { source: string; applies_to?: unknown; rule: { pattern: string } }[];

  it('the override saved: it and your check, narrowed, compiled; then another save compiles that one alone', async () => {
    expect(await work(() => rest('POST', `/v1/projects/${PROJECT}/checks`, { yaml: leakYaml('shop-leak-[0-9]+'), by: 'cli' }))).toEqual({ parses: 1, compiled_rules: 2 });
    expect(leaks().map((c) => [c.source, c.applies_to])).toEqual([
      ['user', { not_project: [PROJECT] }],
      ['database', { project: [PROJECT] }],
    ]);
    // Nothing about leak changed: your narrowed check's rule is kept.
    expect(await work(() => rest('POST', `/v1/projects/${PROJECT}/checks`, { yaml: checkYaml(N + 10), by: 'cli' }))).toEqual({ parses: 1, compiled_rules: 1 });
    expect(await work(() => app.reloadChecks())).toEqual({ parses: 0, compiled_rules: 0 });
  }, 60_000);

  it('the override changed: compiled alone, and its findings follow the new pattern', async () => {
    expect(await work(() => rest('PUT', `/v1/projects/${PROJECT}/checks/leak`, { yaml: leakYaml('shop-leak2-[0-9]+'), by: 'cli' }))).toEqual({ parses: 1, compiled_rules: 1 });
    const found = await leakFindings(PROJECT, KEY, 'override-changed', ['old shop-leak-1234', 'new shop-leak2-1234']);
    expect(found).toEqual(['new shop-leak2-1234']);
  }, 90_000);

  it('your check changed: narrowed and compiled again at the next reload, and its findings follow its new pattern', async () => {
    fs.writeFileSync(path.join(home, 'checks', 'leak.yaml'), leakYaml('user-leak2-[0-9]+'));
    expect(await work(() => app.reloadChecks())).toEqual({ parses: 1, compiled_rules: 1 });
    const [mine] = leaks();
    expect([mine.source, mine.applies_to, mine.rule.pattern]).toEqual(['user', { not_project: [PROJECT] }, 'user-leak2-[0-9]+']);
    const found = await leakFindings(OTHER, OTHER_KEY, 'base-changed', ['old user-leak-1234', 'shop-leak2-1234', 'new user-leak2-1234']);
    // Your check's new pattern, and not the override's (shop's only).
    expect(found).toEqual(['new user-leak2-1234']);
  }, 90_000);
});
