import * as fs from 'node:fs';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { jsonApi, tempHome, testConfig } from './test-app.test';

/**
 * GET checks says what each check in effect replaced (the checks with the same id it
 * overrides, earliest first), as `neatroots checks list` does: your file over the library's,
 * a saved database check over your file.
 */
const KEY = 'overrides-key';
const PROJECT = 'shop';

// Your own version of the library's run-failed, and a rule of yours a saved check replaces.
const MINE = `id: run-failed
kind: rule
title: Run ended with an error
rule:
  type: run_end
  ends: [error]
---
id: refund-needs-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;

interface Listed {
  id: string;
  source: string;
  file?: string;
  overrides?: { source: string; file?: string }[];
  in_effect: boolean;
}

let home: string;
let app: EmbeddedApp;
let base: string;

const call = jsonApi(() => base, KEY);
const api = (method: string, p: string, body?: unknown) => call<{ checks?: Listed[] } & Record<string, unknown>>(method, `/v1/projects/${PROJECT}${p}`, body);

const listed = async (id: string): Promise<Listed[]> => ((await api('GET', '/checks')).body.checks ?? []).filter((c) => c.id === id);

beforeAll(async () => {
  home = tempHome('neatroots-overrides', { 'mine.yaml': MINE });
  app = await startEmbedded({
    config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }),
    inMemoryDb: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
}, 120_000);

afterAll(async () => {
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('GET checks: what each check overrides', () => {
  const mine = () => path.join(home, 'checks', 'mine.yaml');

  it("names the library's check your file replaced, and nothing for a check that replaced none", async () => {
    const [runFailed] = await listed('run-failed');
    expect(runFailed).toMatchObject({ source: 'user', file: mine(), in_effect: true });
    expect(runFailed.overrides).toEqual([{ source: 'library', file: expect.stringMatching(/library[\\/]ending\.yaml$/) }]);
    const [noAnswer] = await listed('no-answer');
    expect(noAnswer).toMatchObject({ source: 'library', overrides: [] });
  });

  it('names your file once a saved database check replaces its rule', async () => {
    expect(await listed('refund-needs-lookup')).toEqual([expect.objectContaining({ source: 'user', overrides: [] })]);
    const saved = await api('POST', '/checks', { yaml: MINE.split('---\n')[1] });
    expect(saved.status).toBe(200);
    expect(await listed('refund-needs-lookup')).toEqual([expect.objectContaining({ source: 'database', in_effect: true, overrides: [{ source: 'user', file: mine() }] })]);
  });
});
