import { readdirSync } from 'node:fs';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { deployments, FIXTURES, fixtureFolder, fixtureSession, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

const KEY = 'key-for-luigis';
const OTHER = 'key-for-other';
const folder = fixtureFolder();
const session = fixtureSession;

let h: SopHarness;

beforeAll(async () => {
  h = await startSopHarness({ luigis: KEY, other: OTHER });
}, 60_000);
afterAll(() => h.close());

describe.each(deployments(() => h))('the workspace endpoints (%s)', (_name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  const ws = `luigis`;
  beforeAll(async () => {
    await h.db.exec('TRUNCATE sop_overrides, sop_verdicts, sop_patterns, sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files CASCADE');
    ({ app, base } = await startApiOn(h.db, ws, sopOf(), reviewOf()));
  });
  afterAll(() => app.close());

  const call = async (method: string, p: string, body?: unknown, type = 'application/json', key = KEY) => {
    const { status, body: answer } = await send(`${base}${p}`, method, key, body, type);
    return { status, body: answer };
  };

  it('saves procedure files at head as text, and answers 422 with sopc errors when head would not compile', async () => {
    const take = folder.find((f) => f.path === 'procedures/take-order.md')!;
    const saved = await call('PUT', '/head/procedures/take-order.md', take.text, 'text/markdown');
    expect(saved).toEqual({ status: 200, body: { path: 'procedures/take-order.md', version: expect.any(String) } });
    const bad = await call('PUT', '/head/agents/phone-agent.yaml', 'procedures: [take-order, nope]\n', 'text/plain');
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: 'does_not_compile', issues: [{ file: 'agents/phone-agent.yaml', line: 1, message: expect.stringContaining('nope') }] });
    expect((await call('PUT', '/head/procedures/x.md', { text: '# X' })).status).toBe(415);
    expect((await call('PUT', '/head/notes/x.txt', 'hi', 'text/plain')).body.error.code).toBe('invalid_path');
    expect((await call('DELETE', '/head/procedures/take-order.md')).body).toEqual({ path: 'procedures/take-order.md', deleted: true });
    expect((await call('DELETE', '/head/procedures/take-order.md')).status).toBe(404);
  });

  it('answers 422 with the first sopc errors that fit and how many more when there are thousands (over gRPC they once never came back)', async () => {
    const names = Array.from({ length: 2000 }, (_, i) => `missing-${i}`);
    const bad = await call('PUT', '/head/agents/phone-agent.yaml', `procedures: [${names.join(', ')}]\n`, 'text/plain');
    expect(bad.status).toBe(422);
    const { code, issues, issues_omitted: omitted } = bad.body.error as { code: string; issues: { file: string; message: string }[]; issues_omitted: number };
    expect(code).toBe('does_not_compile');
    expect(issues.length).toBeGreaterThan(100);
    expect(omitted).toBeGreaterThan(0);
    expect(issues.length + omitted).toBe(2000);
    expect(Buffer.byteLength(JSON.stringify(issues))).toBeLessThanOrEqual(32 * 1024);
    expect(issues[0]).toMatchObject({ file: 'agents/phone-agent.yaml', message: expect.stringContaining('missing-0') });
  });

  it('answers 422 with a short message when sopc\'s errors echo huge lines (over gRPC the message once never came back)', async () => {
    // three headings of 80 KB each: sopc echoes each line in its error ("unknown section ...")
    const line = (c: string) => `## ${c.repeat(80_000)}`;
    const bad = await call('PUT', '/head/procedures/huge.md', `# Huge\n${line('a')}\n${line('b')}\n${line('c')}\n`, 'text/markdown');
    expect(bad.status).toBe(422);
    const { code, message, issues, issues_omitted: omitted } = bad.body.error as { code: string; message: string; issues: { line: number; message: string }[]; issues_omitted?: number };
    expect(code).toBe('does_not_compile');
    expect(message.length).toBeLessThan(2_000);
    expect(message).toMatch(/^head with procedures\/huge\.md would not compile: procedures\/huge\.md:2: unknown section "## aaa+…; procedures\/huge\.md:3: unknown section "## bbb+…; /);
    // each error is there, cut short
    expect(issues.map((i) => i.line)).toEqual([2, 3, 4]);
    expect(omitted).toBeUndefined();
    for (const i of issues) expect(i.message).toMatch(/^unknown section "## (a+|b+|c+)…$/);
    expect(issues.every((i) => i.message.length <= 1000)).toBe(true);
  });

  it('answers 422 with sopc\'s errors that quote text beyond ASCII (over gRPC they once never came back)', async () => {
    const bad = await call('PUT', '/head/procedures/greet.md', '# Grüßen\n## Steps\n1. Grüßen. [requîred]\n', 'text/markdown');
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({
      code: 'does_not_compile',
      message: 'head with procedures/greet.md would not compile: procedures/greet.md:3: unknown annotation "requîred" (known: tool: NAME, required, when: CONDITION)',
      issues: [{ file: 'procedures/greet.md', line: 3, message: 'unknown annotation "requîred" (known: tool: NAME, required, when: CONDITION)' }],
    });
  });

  it('refuses a push with an unknown field, in the body or in a file, and leaves head as it was', async () => {
    const before = (await call('GET', '/head')).body;
    const extra = await call('PUT', '/head', { files: [folder[0], { ...folder[1], mode: '0644' }] });
    expect(extra).toEqual({ status: 400, body: { error: { code: 'invalid_body', message: 'files[1].mode: unknown field (known: path, text)' } } });
    const top = await call('PUT', '/head', { files: folder, force: true });
    expect(top).toMatchObject({ status: 400, body: { error: { code: 'invalid_body', message: 'unknown field force in the body; it takes files' } } });
    expect((await call('GET', '/head')).body).toEqual(before);
  });

  it('pushes a folder, shows the unpublished diff, publishes releases and reads them by number, id and live', async () => {
    expect((await call('POST', '/releases')).body.error.code).toBe('nothing_to_publish');
    const pushed = await call('PUT', '/head', { files: folder });
    expect(pushed.status).toBe(200);
    expect(pushed.body.files.map((f: { path: string }) => f.path).sort()).toEqual(folder.map((f) => f.path).sort());
    const head = await call('GET', '/head');
    expect(head.body.diff).toContain('+++ b/procedures/take-order.md');
    const r1 = await call('POST', '/releases');
    expect(r1.status).toBe(201);
    expect(r1.body).toMatchObject({ number: 1, live: true });
    expect(r1.body.procedures.map((p: { procedure_id: string }) => p.procedure_id).sort()).toEqual(['answer-call', 'card-payment', 'take-order']);
    expect((await call('GET', '/head')).body.diff).toBe('');
    expect((await call('GET', '/releases/live')).body.id).toBe(r1.body.id);
    expect((await call('GET', `/releases/${r1.body.id}`)).body.number).toBe(1);
    expect((await call('GET', '/releases/1')).body.live).toBe(true);
    expect((await call('GET', '/releases/7')).status).toBe(404);
    expect((await call('GET', '/releases')).body.items).toHaveLength(1);
  });

  it('takes sessions (202, idempotent by content) and serves their checks', async () => {
    const sent = await call('POST', '/sessions', session('payment-skipped'));
    expect(sent).toEqual({ status: 202, body: { id: expect.any(String), external_id: 'pay-3', status: 'queued' } });
    expect((await call('POST', '/sessions', session('payment-skipped'))).body.status).toBe('unchanged');
    let got = await call('GET', `/sessions/${sent.body.id}`);
    for (let i = 0; got.body.status === 'queued' && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 10));
      got = await call('GET', `/sessions/${sent.body.id}`);
    }
    expect(got.body).toMatchObject({ id: sent.body.id, status: 'checked', result: 'deviated', release_id: expect.stringMatching(/^rel_/) });
    const skipped = got.body.checks[0].rules.find((r: { status: string }) => r.status === 'skipped');
    expect(skipped).toMatchObject({ kind: 'step', finding: true, finding_id: expect.any(String) });
    const list = await call('GET', '/sessions?result=deviated&limit=10');
    expect(list.body.items.map((s: { id: string }) => s.id)).toEqual([sent.body.id]);
    expect((await call('GET', '/sessions?status=deviated')).body.error.code).toBe('unknown_parameter');
    expect((await call('GET', '/sessions?from=yesterday')).status).toBe(400);
    const bad = await call('POST', '/sessions', { external_id: 'x', agent: 'payments-bot', turns: 'hello' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('turns');
    expect((await call('GET', '/sessions/ses_nope')).status).toBe(404);
  });

  it('refuses a session whose bad value is huge with 400 and a short message (over gRPC it once never came back)', async () => {
    const huge = 'x'.repeat(100_000);
    for (const body of [
      { external_id: 'x', agent: 'payments-bot', turns: huge },
      { external_id: 'x', agent: 'payments-bot', turns: [{ role: huge, text: 'hi' }] },
      { external_id: 'x', agent: 'payments-bot', turns: [], [huge]: 1 },
      { external_id: 'x', agent: 'payments-bot', turns: [{ role: 'user', text: 'hi' }], tool_calls: [{ turn: huge, tool: 'x' }] },
      { external_id: 'x', agent: 'payments-bot', turns: [], started_at: huge },
    ]) {
      const bad = await call('POST', '/sessions', body);
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_session');
      expect(bad.body.error.message.length).toBeLessThan(500);
    }
  });

  it('groups the findings into patterns, takes a verdict, and refuses a bad one the same way', async () => {
    let queue = await call('GET', '/review');
    for (let i = 0; queue.body.items.length === 0 && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 20));
      queue = await call('GET', '/review');
    }
    expect(queue.status).toBe(200);
    const item = queue.body.items[0];
    expect(item).toMatchObject({ review_state: 'needs_review', review_reason: 'no_verdict', verdict: null });
    const given = await call('POST', `/patterns/${item.pattern_id ?? item.id}/verdict`, { verdict: 'real', note: 'looked at it', reviewer: 'ana' });
    expect(given.status).toBe(201);
    expect((await call('GET', '/review?state=open')).body.items.map((x: { id?: string; pattern_id?: string }) => x.pattern_id ?? x.id)).toContain(item.pattern_id ?? item.id);
    const bad = await call('POST', `/patterns/${item.pattern_id ?? item.id}/verdict`, { verdict: 'maybe' });
    expect(bad.status).toBe(400);
    expect((await call('GET', '/insights')).status).toBe(200);
    // No model here: rename names nothing and says why; a wrong body is refused by name.
    const renamed = await call('POST', '/patterns/rename', { all: true });
    expect(renamed).toMatchObject({ status: 200, body: { renamed: 0, reason: expect.stringMatching(/no reasoning model is configured/) } });
    expect(renamed.body.failed).toBeGreaterThan(0);
    expect(await call('POST', '/patterns/rename', { all: 'yes' })).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/"all" must be true or false/) } } });
    // No model: recluster splits and groups nothing and says so; a wrong body or a query is refused by name.
    const reclustered = await call('POST', '/patterns/recluster', { force: true });
    expect(reclustered).toEqual({ status: 200, body: { assigned: 0, reclustered: 0, themed: 0, reason: 'no reasoning model is configured: themes were not grouped' } });
    expect((await call('POST', '/patterns/recluster')).status).toBe(200);
    expect(await call('POST', '/patterns/recluster', { force: 'yes' })).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/"force" must be true or false/) } } });
    expect(await call('POST', '/patterns/recluster', { rules: 'x' })).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/unknown field "rules"/) } } });
    expect((await call('POST', '/patterns/recluster?force=true', {})).status).toBe(400);
  });

  it('opens a workspace only with its own key', async () => {
    expect((await call('GET', '/head', undefined, undefined, OTHER)).status).toBe(403);
    expect((await call('GET', '/head', undefined, undefined, 'nope')).status).toBe(401);
  });
});

it('every fixture session is sent as the contract says (a sanity check of the fixtures used above)', () => {
  expect(readdirSync(path.join(FIXTURES, 'sessions')).length).toBeGreaterThan(5);
});
