import type { INestApplication } from '@nestjs/common';
import { deployments, fixtureFolder, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * GET /v1/workspaces/{ws}/head/{path}: one file at head, its text as saved and its version
 * (the one PUT answered), so the app can open a procedure to edit it; 404 when head has no such
 * file. The same answers in-process and over gRPC (neatroots.v1.Sop GetHeadFile).
 */
const KEY = 'key-for-head-file';
const OTHER = 'key-for-someone-else';
const folder = fixtureFolder();

let h: SopHarness;

beforeAll(async () => {
  h = await startSopHarness({ luigis: KEY, other: OTHER });
}, 60_000);
afterAll(() => h.close());

describe.each(deployments(() => h))('GET head/{path} (%s)', (_name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    await h.db.exec('TRUNCATE sop_head_files CASCADE');
    ({ app, base } = await startApiOn(h.db, 'luigis', sopOf(), reviewOf()));
  });
  afterAll(() => app.close());

  it("answers a head file's text and the version its save answered; 404 once removed or never there", async () => {
    expect((await send(`${base}/head`, 'PUT', KEY, { files: folder })).status).toBe(200);
    const take = folder.find((f) => f.path === 'procedures/take-order.md')!;
    const edited = take.text.replace('Ask what the caller would like to order.', 'Ask the caller what they would like.');
    expect(edited).not.toBe(take.text);
    const saved = await send(`${base}/head/procedures/take-order.md`, 'PUT', KEY, edited, 'text/markdown');
    expect(saved.status).toBe(200);

    const got = await send(`${base}/head/procedures/take-order.md`, 'GET', KEY);
    expect(got).toMatchObject({ status: 200, body: { path: 'procedures/take-order.md', text: edited, version: saved.body.version, updated_at: expect.any(String) } });
    // The version GET head lists for the file is the same one.
    const listed = (await send(`${base}/head`, 'GET', KEY)).body.files.find((f: { path: string }) => f.path === 'procedures/take-order.md');
    expect(listed.version).toBe(got.body.version);

    const missing = await send(`${base}/head/procedures/nope.md`, 'GET', KEY);
    expect(missing).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'procedures/nope.md is not in head' } } });
    expect((await send(`${base}/head/notes/x.txt`, 'GET', KEY)).body.error.code).toBe('invalid_path');
    expect((await send(`${base}/head/procedures/take-order.md?v=1`, 'GET', KEY)).status).toBe(400);
    // Another workspace's key reads nothing here.
    expect((await send(`${base}/head/procedures/take-order.md`, 'GET', OTHER)).status).toBe(403);
  });
});
