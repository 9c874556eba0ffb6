/**
 * GET /v1/projects/{project}/checks/disabled: the match checks a running neatroots disabled
 * for a slow pattern, with the reason, for the checks that run in the key's project only.
 * The rule engine records them in the home folder (recordDisabledChecks); the api reads them
 * there (disabledChecksFor), as the app wires it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { DisabledChecks, disabledChecksFor, recordDisabledChecks, type DisabledCheck } from '@neatroots/checks';
import type { ReviewQueries } from '@neatroots/store';
import { apiUrl, createApi } from './api';

const KEYS: Record<string, string> = { 'key-p1': 'p1', 'key-p2': 'p2' };
const REASON = 'pattern took over 104 ms on one span (limit 50 ms); skipped until neatroots restarts';

const check = (id: string, extra: Partial<DisabledCheck> = {}): DisabledCheck => ({
  check_id: id, pattern: `${id}[a-z]{1,200}x`, source: 'user', reason: REASON, ms: 104, limit_ms: 50, since: '2026-01-02T03:04:05.000Z', ...extra,
});

let home: string;
let app: INestApplication;
let base: string;
let stop: () => void;

beforeAll(async () => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-api-disabled-'));
  // What a rule engine on this home recorded (this test process stands for it).
  const list = new DisabledChecks();
  list.add(check('everywhere'));
  list.add(check('only-p2', { projects: ['p2'] }));
  list.add(check('not-in-p1', { not_projects: ['p1'] }));
  stop = recordDisabledChecks(home, list);
  app = await createApi({
    queries: {} as ReviewQueries,
    resolveKey: (k) => (KEYS[k] ? { project: KEYS[k], scope: 'api' } : null),
    disabledChecks: (project) => disabledChecksFor(home, project),
    port: 0,
    logger: false,
  });
  base = apiUrl(app);
});

afterAll(async () => {
  stop();
  await app.close();
  fs.rmSync(home, { recursive: true, force: true });
});

const get = async (project: string, key: string) => {
  const res = await fetch(`${base}/v1/projects/${project}/checks/disabled`, { headers: { 'x-api-key': key } });
  return { status: res.status, body: (await res.json()) as { checks?: DisabledCheck[]; error?: { code: string } } };
};

it('lists the disabled checks that run in the project, each with its reason', async () => {
  const p1 = await get('p1', 'key-p1');
  expect(p1.status).toBe(200);
  expect(p1.body.checks).toEqual([check('everywhere')]);
  const p2 = await get('p2', 'key-p2');
  expect(p2.body.checks!.map((c) => c.check_id).sort()).toEqual(['everywhere', 'not-in-p1', 'only-p2']);
});

it('is empty once the neatroots that disabled them stops (a restart turns them back on)', async () => {
  stop();
  expect((await get('p2', 'key-p2')).body.checks).toEqual([]);
  stop = recordDisabledChecks(home, new DisabledChecks());
});

it('asks for the project\'s key like every other endpoint', async () => {
  expect((await get('p1', 'key-p2')).status).toBe(403);
  expect((await get('p1', 'nope')).status).toBe(401);
});
