import * as fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger, loadConfig } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { jsonApi, tempHome, testConfig } from './test-app.test';

/**
 * The checks coding agents may save in a project are bounded (NEATROOTS_MAX_AGENT_CHECKS): every
 * check runs on every span, and an agent in a loop saved 300 through MCP create_check. Against a
 * real embedded neatroots with the bound at 3: the fourth new check of an agent is refused with
 * a tool error naming the bound and how to raise it; replacing one it saved still works, and a
 * person's saves through the REST API are not counted nor refused.
 */
const KEY = 'agent-cap-key';
const PROJECT = 'shop';
const rule = (id: string, title = 'Refund without an order lookup') => `id: ${id}
kind: rule
title: ${title}
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;

let home: string;
let app: EmbeddedApp;
let base: string;
let client: Client;
const api = jsonApi(() => base, KEY);

async function createCheck(yaml: string): Promise<{ isError?: boolean; text: string }> {
  const r = (await client.callTool({ name: 'create_check', arguments: { yaml } })) as { isError?: boolean; content: { text: string }[] };
  return { isError: r.isError, text: r.content.map((c) => c.text).join('\n') };
}

beforeAll(async () => {
  home = tempHome('neatroots-agent-cap');
  app = await startEmbedded({
    config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_MAX_AGENT_CHECKS: '3' }),
    inMemoryDb: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
  client = new Client({ name: 'agent-cap', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
}, 120_000);

afterAll(async () => {
  await client?.close();
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

it('is 100 by default', () => {
  expect(loadConfig({}).NEATROOTS_MAX_AGENT_CHECKS).toBe(100);
});

it("refuses an agent's check past the bound, saying how to raise it; replacing its own and a person's saves still work", async () => {
  for (const i of [1, 2, 3]) expect((await createCheck(rule(`agent-${i}`))).isError).toBeFalsy();

  const refused = await createCheck(rule('agent-4'));
  expect(refused).toEqual({
    isError: true,
    text:
      'too_many_checks: project shop has 3 checks saved by coding agents, the most allowed (NEATROOTS_MAX_AGENT_CHECKS=3): replace one of them (save a check with its id), ' +
      'or have a person delete some (the app, or DELETE /v1/projects/shop/checks/{id}) or raise NEATROOTS_MAX_AGENT_CHECKS on the server',
  });
  expect(app.checks().checks.map((c) => c.id)).not.toContain('agent-4');

  // Replacing a check it saved is not a new one.
  const replaced = await createCheck(rule('agent-2', 'Refund before the lookup'));
  expect(replaced.isError).toBeFalsy();
  expect(JSON.parse(replaced.text)).toMatchObject({ created: false, check: { id: 'agent-2', title: 'Refund before the lookup' } });

  // A person saves through the REST API (the app, the CLI) whatever the agents saved.
  for (const by of ['app', 'cli']) {
    const saved = await api<{ created: boolean }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: rule(`persons-${by}`), by });
    expect(saved).toMatchObject({ status: 200, body: { created: true } });
  }

  // Once a person deletes one of the agents' checks, the agent may save a new one.
  expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/agent-1`)).status).toBe(200);
  expect((await createCheck(rule('agent-4'))).isError).toBeFalsy();
  expect((await createCheck(rule('agent-5'))).text).toMatch(/^too_many_checks: project shop has 3 checks saved by coding agents/);
});

it('holds the bound when agents save new checks at the same moment: one more is saved, the others refused', async () => {
  // The project is at its bound (3); a person deletes one, and six new checks come at once.
  const agentChecks = async () =>
    (await api<{ checks: { id: string; source: string; origin?: string }[] }>('GET', `/v1/projects/${PROJECT}/checks`)).body.checks.filter((c) => c.source === 'database' && c.origin === 'agent').map((c) => c.id);
  expect((await agentChecks()).length).toBe(3);
  expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/agent-2`)).status).toBe(200);
  const ids = ['race-1', 'race-2', 'race-3', 'race-4', 'race-5', 'race-6'];
  const answers = await Promise.all(ids.map((id) => createCheck(rule(id))));
  const saved = ids.filter((_, i) => !answers[i].isError);
  expect(saved).toHaveLength(1);
  for (const a of answers.filter((x) => x.isError)) expect(a.text).toMatch(/^too_many_checks: project shop has 3 checks saved by coding agents, the most allowed \(NEATROOTS_MAX_AGENT_CHECKS=3\)/);
  expect((await agentChecks()).sort()).toEqual(['agent-3', 'agent-4', saved[0]].sort());
  expect(app.checks().checks.map((c) => c.id).filter((id) => id.startsWith('race-'))).toEqual(saved);
});
