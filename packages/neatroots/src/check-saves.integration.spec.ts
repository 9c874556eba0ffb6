import * as fs from 'node:fs';
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
const N = 200;

const checkYaml = (i: number, pattern = `secret-${i}-[0-9]{4}`) =>
  i % 4 === 0
    ? `id: save-${i}\nkind: rule\ntitle: secret ${i}\nrule:\n  type: match\n  span: { tool: [tool_${i}] }\n  pattern: '${pattern}'\n  in: [output]\n`
    : `id: save-${i}\nkind: rule\ntitle: tool ${i} without lookup\nrule:\n  type: requires_before\n  call: { tool: [tool_${i}] }\n  requires: { tool: [lookup] }\n`;

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
  home = tempHome('neatroots-check-saves');
  app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
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
