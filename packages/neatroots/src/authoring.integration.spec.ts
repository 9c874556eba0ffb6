import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { registerProject } from '@neatroots/checks';
import { createLogger, loadModelConfig } from '@neatroots/platform';
import { NeatrootsClient, RunHaltedError } from '@neatroots/sdk';
import { QuestionsRepo } from '@neatroots/store';
import { judgeReply, parseJudgePrompt, startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { main, type Io } from './cli';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { jsonApi, REFUND_LOOKUP_RULE, tempHome, testConfig } from './test-app.test';

/**
 * Checks written by people (issue 14), against a real embedded neatroots whose question
 * service asks the scripted OpenAI-compatible server: draft from a concern, preview on the
 * project's stored runs (the same findings `neatroots replay` gives on those runs), save,
 * list, update, delete, and switching a rule to halt; a saved check takes effect in the
 * running rule engine.
 */
const KEY = 'authoring-key';
const OTHER_KEY = 'authoring-other-key';
const PROJECT = 'shop';
const CLAIM = 'Your refund for order 7 went through.';

const RULE = REFUND_LOOKUP_RULE;

const QUESTION = `id: false-refund-claim
kind: yes_no
scope: trace
ask: Does the final response claim a refund went through that the tools do not show?
evidence: { final_output: true }
when: end
`;

/** A question whose model calls wait while `hold` is set: previews that stay running. */
const SLOW = `id: callback-promise
kind: yes_no
scope: trace
ask: Does the final response promise a callback?
evidence: { final_output: true }
when: end
`;
const isSlow = (call: FakeCall) => call.kind === 'judge' && parseJudgePrompt(call).some((q) => q.ask.includes('promise a callback'));
let hold: Promise<void> | undefined;

function script(call: FakeCall): FakeReply | Promise<FakeReply> {
  if (hold && isSlow(call)) return hold.then(() => script(call));
  if (call.kind === 'draft') {
    const concern = call.body.messages[1].content.split('\n')[0];
    if (/looking up/.test(concern)) {
      return { json: { check: 'rule', id: 'refund-before-lookup', title: 'Refund before lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } } };
    }
    return { json: { check: 'question', id: 'false-refund', kind: 'yes_no', scope: 'span', ask: 'Does the agent claim a refund went through that the tools do not show?' } };
  }
  // The claim is in the run's final answer only in the bad run.
  if (call.kind === 'judge') return judgeReply(call, (q) => (q.evidence.includes(CLAIM) ? { p: 0.97, quote: CLAIM } : { p: 0.02 }));
  if (call.kind === 'second_look') return { json: { holds: true, quote: CLAIM } };
  return { json: {} };
}

let fake: FakeOpenAI;
let home: string;
let app: EmbeddedApp;
let base: string;
let agent: NeatrootsClient;

const api = jsonApi(() => base, KEY);

/** A refund run: with or without the lookup first, and the answer it gave. */
async function refundRun(runId: string, lookup: boolean, answer: string): Promise<void> {
  const run = agent.startRun({ run_id: runId, workflow: 'refunds', tools: [{ name: 'lookup_order' }, { name: 'issue_refund' }] });
  const t = Date.now();
  if (lookup) run.span({ type: 'tool', tool: 'lookup_order', input: { order: 7 }, output: 'order 7: refund declined', start_ms: t, end_ms: t + 5 });
  run.span({ type: 'tool', tool: 'issue_refund', input: { order: 7 }, output: lookup ? 'declined' : 'refund queued', start_ms: t + 10, end_ms: t + 15 });
  await run.end({ final_output: answer });
  await agent.flush();
}

async function until<T>(what: string, get: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function storedRun(runId: string): Promise<void> {
  await until(`run ${runId}`, async () => {
    const r = await api<{ run?: { end_status: string | null } }>('GET', `/v1/projects/${PROJECT}/runs/${runId}`);
    return r.status === 200 && r.body.run?.end_status ? true : undefined;
  });
}

beforeAll(async () => {
  fake = await startFakeOpenAI(script);
  home = tempHome('neatroots-authoring');
  const config = testConfig(home, {
    NEATROOTS_API_KEYS: `${PROJECT}=${KEY},other=${OTHER_KEY}`,
  });
  app = await startEmbedded({
    config,
    inMemoryDb: true,
    watch: false,
    models: loadModelConfig({ NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_QUESTION_BATCH_WAIT_MS: '5' }),
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
  agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
  await refundRun('run-good', true, 'Sorry, the refund for order 7 was declined.');
  // Runs are listed newest first by their start: the bad one starts later.
  await new Promise((r) => setTimeout(r, 30));
  await refundRun('run-bad', false, CLAIM);
  await storedRun('run-good');
  await storedRun('run-bad');
}, 120_000);

afterAll(async () => {
  await agent?.close();
  await app?.close();
  await fake?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** The findings `neatroots replay` prints for `checkYaml` over the runs as the API serves them. */
async function replayFindings(checkYaml: string, runIds: string[], env: NodeJS.ProcessEnv = {}): Promise<{ check_id: string; run_id: string }[]> {
  const dir = fs.mkdtempSync(path.join(home, 'replay-'));
  fs.mkdirSync(path.join(dir, 'checks'));
  fs.writeFileSync(path.join(dir, 'checks', 'c.yaml'), checkYaml);
  const lines: unknown[] = [];
  for (const id of runIds) {
    const { body } = await api<{ run: { workflow: string; final_output: unknown; end_status: string; run_start: Record<string, unknown> }; spans: Record<string, unknown>[] }>('GET', `/v1/projects/${PROJECT}/runs/${id}`);
    lines.push({ ...body.run.run_start, event: 'run_start', run_id: id, project: PROJECT });
    for (const s of body.spans) lines.push({ ...s, project: PROJECT });
    lines.push({ event: 'run_end', run_id: id, status: body.run.end_status, final_output: body.run.final_output });
  }
  fs.writeFileSync(path.join(dir, 'runs.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n'));
  const out: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: () => undefined, env: { NEATROOTS_HOME: path.join(dir, 'home'), ...env }, cwd: dir };
  expect(await main(['replay', '--no-library', '--checks', 'checks', 'runs.jsonl'], io)).toBe(0);
  return out.map((l) => JSON.parse(l) as { check_id: string; run_id: string; status: string }).filter((f) => f.status !== 'resolved').map((f) => ({ check_id: f.check_id, run_id: f.run_id }));
}

describe('checks authoring API', () => {
  it('drafts a rule for an order of calls, naming the tools the project uses', async () => {
    const r = await api<{ kind: string; check: { id: string; rule: { type: string }; applies_to: unknown }; yaml: string }>('POST', `/v1/projects/${PROJECT}/checks/draft`, {
      concern: 'refunds issued without looking up the order first',
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ kind: 'rule', check: { id: 'refund-before-lookup', rule: { type: 'requires_before' }, applies_to: { project: [PROJECT] } } });
    const asked = fake.calls.filter((c) => c.kind === 'draft').pop()!;
    expect(asked.body.messages[1].content).toMatch(/The agent's tools: .*lookup_order.*issue_refund|issue_refund.*lookup_order/);
  });

  it('drafts a question otherwise, given the answer to see, with the seed\'s warning', async () => {
    const r = await api<{ kind: string; check: { scope: string; evidence: unknown }; warnings: string[] }>('POST', `/v1/projects/${PROJECT}/checks/draft`, {
      concern: 'the bot says refunds went through when they did not',
    });
    expect(r.body).toMatchObject({ kind: 'question', check: { scope: 'trace', evidence: { final_output: true } } });
    expect(r.body.warnings.join('\n')).toMatch(/asks about the agent's answer/);
    const bad = await api('POST', `/v1/projects/${PROJECT}/checks/draft`, { concern: '' });
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
  });

  it('previews a rule on the recent runs: the runs replay flags, by the real engine', async () => {
    const r = await api<{ flagged: { run_id: string; findings: { check_id: string }[] }[]; runs: Record<string, unknown>; bounds: string }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: RULE, runs: 10 });
    expect(r.status).toBe(200);
    expect(r.body.runs).toEqual({ checked: 2, limit: 10, flagged: 1, more: false });
    expect(r.body.flagged.map((f) => f.run_id)).toEqual(['run-bad']);
    const previewed = r.body.flagged.flatMap((f) => f.findings.map((x) => ({ check_id: x.check_id, run_id: f.run_id })));
    expect(previewed).toEqual(await replayFindings(RULE, ['run-good', 'run-bad']));
    expect(r.body.bounds).toMatch(/the 2 most recent runs of project shop/);
    // Bounded in runs, and saying there were more.
    const one = await api<{ runs: Record<string, unknown> }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: RULE, runs: 1 });
    expect(one.body.runs).toEqual({ checked: 1, limit: 1, flagged: 1, more: true });
  });

  it('previews a question through the real question path, counting and bounding its model calls', async () => {
    await app.questions.idle();
    const before = fake.calls.length;
    const r = await api<{ flagged: { run_id: string; findings: { quote?: string }[] }[]; model_calls: { used: number; limit: number; exhausted: boolean } }>(
      'POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: QUESTION, model_calls: 10 });
    expect(r.status).toBe(200);
    expect(r.body.flagged.map((f) => f.run_id)).toEqual(['run-bad']);
    expect(r.body.flagged[0].findings[0].quote).toBe(CLAIM);
    expect(r.body.model_calls).toEqual({ used: fake.calls.length - before, limit: 10, exhausted: false });
    expect(r.body.model_calls.used).toBeGreaterThan(0);
    expect(await replayFindings(QUESTION, ['run-good', 'run-bad'], { NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test' })).toEqual([
      { check_id: 'false-refund-claim', run_id: 'run-bad' },
    ]);

    const start = fake.calls.length;
    const bounded = await api<{ flagged: unknown[]; model_calls: { used: number; exhausted: boolean }; not_checked: { run_id: string }[]; bounds: string }>(
      'POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: QUESTION.replace('false-refund-claim', 'false-refund-claim-2'), model_calls: 1 });
    expect(bounded.body.model_calls).toMatchObject({ used: 1, exhausted: true });
    expect(fake.calls.length - start).toBe(1);
    expect(bounded.body.flagged).toEqual([]);
    expect(bounded.body.not_checked.length).toBeGreaterThan(0);
    expect(bounded.body.bounds).toMatch(/not checked/);
  });

  it('runs at most two previews at once: a third is refused with 429 until one has finished', async () => {
    await app.questions.idle();
    let release!: () => void;
    hold = new Promise<void>((r) => (release = r));
    const before = fake.calls.length;
    const slow = [1, 2].map((i) => api<{ flagged: unknown[] }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: SLOW.replace('callback-promise', `callback-promise-${i}`).replace('a callback?', `a callback (${i})?`) }));
    try {
      // Both are running: each has asked the model (its own question) and waits for the answer.
      const asked = () => new Set(fake.calls.slice(before).filter(isSlow).flatMap((c) => parseJudgePrompt(c).map((q) => q.ask)));
      await until('both previews at the model', async () => (asked().size >= 2 ? true : undefined));
      const third = await api<{ error: { code: string; message: string } }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: RULE });
      expect(third.status).toBe(429);
      expect(third.body.error).toEqual({
        code: 'too_many_previews',
        message: '2 previews are running on this server, the most at once (each may make model calls); retry when one has finished',
      });
    } finally {
      hold = undefined;
      release();
    }
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual([200, 200]);
    expect((await api('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: RULE })).status).toBe(200);
  });

  it('refuses an invalid check naming the field and its line', async () => {
    const r = await api<{ error: { code: string; problems: { field: string; line: number; reason: string }[] } }>('POST', `/v1/projects/${PROJECT}/checks`, {
      yaml: RULE.replace('type: requires_before', 'type: requires_befor'),
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_check');
    expect(r.body.error.problems).toEqual([expect.objectContaining({ field: 'rule.type', line: 6 })]);
    // The body, field by field.
    for (const [body, message] of [
      [{ yaml: RULE, check: { id: 'x' } }, /not both/],
      [{}, /the check is missing/],
      [{ yaml: RULE, by: 'agent' }, /by must be app or cli/],
      [{ yaml: RULE, colour: 'red' }, /unknown field colour/],
    ] as const) {
      const bad = await api<{ error: { code: string; message: string } }>('POST', `/v1/projects/${PROJECT}/checks`, body);
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toMatch(message);
    }
    const runs = await api<{ error: { message: string } }>('POST', `/v1/projects/${PROJECT}/checks/preview`, { yaml: RULE, runs: 101 });
    expect(runs.body.error.message).toBe('runs must be an integer from 1 to 100');
    const scoped = await api<{ error: { problems: { field: string }[] } }>('POST', `/v1/projects/${PROJECT}/checks`, { check: { id: 'x', kind: 'rule', rule: { type: 'count', at_least: 2 }, applies_to: { project: ['other'] } } });
    expect(scoped.status).toBe(400);
    expect(scoped.body.error.problems[0].field).toBe('applies_to.project');
    // An id that is a page of the API (GET checks/stats) could never be read back.
    const reserved = await api<{ error: { problems: { field: string; reason: string }[] } }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('id: refund-needs-lookup', 'id: stats') });
    expect(reserved.status).toBe(400);
    expect(reserved.body.error.problems).toEqual([expect.objectContaining({ field: 'id', reason: expect.stringContaining('names a page of the API') })]);
  });

  it('saves a check that takes effect in the running rule engine, lists, updates and deletes it', async () => {
    const saved = await api<{ created: boolean; check: Record<string, unknown> }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE, by: 'cli' });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ created: true, check: { id: 'refund-needs-lookup', source: 'database', origin: 'cli', action: 'flag', in_effect: true } });
    // The YAML is kept as written (its comment), made the project's own.
    expect((saved.body.check.yaml as string).startsWith('# refunds need the order looked up first')).toBe(true);

    await refundRun('run-after-save', false, 'Done.');
    await until('the saved check to flag a new run', async () => {
      const f = await api<{ findings: { check_id: string }[] }>('GET', `/v1/projects/${PROJECT}/findings?run_id=run-after-save`);
      return f.body.findings.some((x) => x.check_id === 'refund-needs-lookup') ? true : undefined;
    });

    const list = await api<{ checks: { id: string; source: string }[] }>('GET', `/v1/projects/${PROJECT}/checks`);
    expect(list.body.checks).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'refund-needs-lookup', source: 'database' }), expect.objectContaining({ id: 'repeated-tool-call', source: 'library' })]));
    // Another project's key sees none of it, and cannot reach it.
    const other = await api<{ checks: { id: string }[] }>('GET', '/v1/projects/other/checks', undefined, OTHER_KEY);
    expect(other.body.checks.map((c) => c.id)).not.toContain('refund-needs-lookup');
    expect((await api('GET', `/v1/projects/${PROJECT}/checks/refund-needs-lookup`, undefined, OTHER_KEY)).status).toBe(403);

    const wrongId = await api<{ error: { problems: { field: string }[] } }>('PUT', `/v1/projects/${PROJECT}/checks/another-id`, { yaml: RULE });
    expect(wrongId.status).toBe(400);
    expect(wrongId.body.error.problems[0].field).toBe('id');
    const updated = await api<{ created: boolean; check: { title: string } }>('PUT', `/v1/projects/${PROJECT}/checks/refund-needs-lookup`, { yaml: RULE.replace('title: Refund without an order lookup', 'title: Refund, no lookup') });
    expect(updated.body).toMatchObject({ created: false, check: { title: 'Refund, no lookup' } });

    expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/refund-needs-lookup`)).status).toBe(200);
    expect((await api('GET', `/v1/projects/${PROJECT}/checks/refund-needs-lookup`)).status).toBe(404);
    expect(app.checks().checks.map((c) => c.id)).not.toContain('refund-needs-lookup');
    expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/repeated-tool-call`)).status).toBe(409);
  });

  it('deletes a planner question still asked from its plan with no check left (an install from before deletes left the plan)', async () => {
    const plans = new QuestionsRepo(app.db);
    const written = { id: 'plan-refunds-stale', yaml: 'id: plan-refunds-stale\nkind: yes_no\nask: Was it stale?\n' };
    await plans.put({ project: PROJECT, workflow: 'refunds', tools: ['issue_refund'], picks: [], written: [written], planned_by: 'local', at_ms: 1 });
    expect((await api('GET', `/v1/projects/${PROJECT}/checks/plan-refunds-stale`)).status).toBe(404);
    expect(await plans.get(PROJECT, 'refunds')).toMatchObject({ written: [written] });

    expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/plan-refunds-stale`)).status).toBe(200);
    expect(await plans.get(PROJECT, 'refunds')).toMatchObject({ written: [], deleted: ['plan-refunds-stale'] });
    expect((await api('DELETE', `/v1/projects/${PROJECT}/checks/plan-refunds-stale`)).status).toBe(404);
  });

  it('switches a person\'s rule, or one a coding agent saved, to halt, refusing library checks and questions', async () => {
    await api('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('refund-needs-lookup', 'refund-halt'), by: 'cli' });
    const halted = await api<{ check: { action: string; yaml: string; in_effect: boolean }; steering: boolean }>('POST', `/v1/projects/${PROJECT}/checks/refund-halt/halt`, { by: 'cli' });
    expect(halted.status).toBe(200);
    expect(halted.body).toMatchObject({ check: { action: 'halt', in_effect: true }, steering: false });
    expect(halted.body.check.yaml).toMatch(/^action: halt$/m);
    expect(app.checks().checks.find((c) => c.id === 'refund-halt')).toMatchObject({ action: 'halt', source: 'database' });

    const library = await api<{ error: { code: string; message: string } }>('POST', `/v1/projects/${PROJECT}/checks/repeated-tool-call/halt`);
    expect(library.status).toBe(409);
    expect(library.body.error.message).toMatch(/library check/);

    await api('POST', `/v1/projects/${PROJECT}/checks`, { yaml: QUESTION });
    expect((await api<{ error: { message: string } }>('POST', `/v1/projects/${PROJECT}/checks/false-refund-claim/halt`)).body.error.message).toMatch(/only rules can halt/);

    // A flag rule a coding agent saved (as the MCP tools store it): the person switches it, and it is theirs from then on.
    await app.review.data.putCheck({ id: 'agent-rule', yaml: RULE.replace('refund-needs-lookup', 'agent-rule'), origin: 'agent', project: PROJECT, saved: true });
    const byAgent = await api<{ check: { action: string } }>('POST', `/v1/projects/${PROJECT}/checks/agent-rule/halt`, { by: 'app' });
    expect(byAgent).toMatchObject({ status: 200, body: { check: { action: 'halt' } } });
    expect((await app.review.data.checkRecords(PROJECT)).find((r) => r.id === 'agent-rule')).toMatchObject({ origin: 'app' });
    // A coding agent cannot switch one itself.
    const itself = await api<{ error: { code: string } }>('POST', `/v1/projects/${PROJECT}/checks/agent-rule/halt`, { by: 'agent' });
    expect(itself.status).toBeGreaterThanOrEqual(400);
    expect((await api('POST', `/v1/projects/${PROJECT}/checks/nope/halt`)).status).toBe(404);
  });
});

describe('neatroots checks draft | preview | save | halt against the running server', () => {
  function cli(): Io & { lines: string[]; errors: string[] } {
    const lines: string[] = [];
    const errors: string[] = [];
    return { out: (l) => lines.push(l), err: (l) => errors.push(l), env: { NEATROOTS_URL: base, NEATROOTS_API_KEY: KEY, NEATROOTS_PROJECT: PROJECT }, cwd: home, lines, errors };
  }

  it('has --help for each, and says what is missing', async () => {
    for (const sub of ['draft', 'preview', 'save', 'halt']) {
      const o = cli();
      expect(await main(['checks', sub, '--help'], o)).toBe(0);
      expect(o.lines[0]).toMatch(new RegExp(`^Usage: neatroots checks ${sub} `));
    }
    const o = cli();
    o.env = { NEATROOTS_URL: base, NEATROOTS_API_KEY: KEY };
    expect(await main(['checks', 'halt', 'x'], o)).toBe(2);
    expect(o.errors.join('\n')).toMatch(/which project: --project P or NEATROOTS_PROJECT/);
  });

  it('drafts to standard output, previews, saves and halts a rule', async () => {
    const draft = cli();
    expect(await main(['checks', 'draft', 'refunds issued without looking up the order first'], draft)).toBe(0);
    expect(draft.lines.join('\n')).toMatch(/type: requires_before/);
    const file = path.join(home, 'cli-rule.yaml');
    fs.writeFileSync(file, RULE.replace('refund-needs-lookup', 'cli-rule'));

    const preview = cli();
    expect(await main(['checks', 'preview', 'cli-rule.yaml', '--runs', '50'], preview)).toBe(0);
    expect(preview.lines[0]).toMatch(/^cli-rule would flag 2 of 3 runs$/);
    expect(preview.lines.join('\n')).toMatch(/run-bad \(refunds\)/);
    expect(preview.lines.at(-1)).toMatch(/^Previewed on the 3 most recent runs of project shop/);

    const save = cli();
    expect(await main(['checks', 'save', 'cli-rule.yaml'], save)).toBe(0);
    expect(save.lines).toEqual(['saved check cli-rule in project shop (in effect)']);
    expect(app.checks().checks.find((c) => c.id === 'cli-rule')).toMatchObject({ source: 'database', action: 'flag' });

    const halt = cli();
    expect(await main(['checks', 'halt', 'cli-rule'], halt)).toBe(0);
    expect(halt.lines).toEqual(['check cli-rule now halts in project shop', expect.stringMatching(/^steering is off in project shop/)]);
    expect(app.checks().checks.find((c) => c.id === 'cli-rule')).toMatchObject({ action: 'halt' });
  });

  it('says so when a save replaces a halting check with YAML that has no action: halt, and keeps the YAML as written', async () => {
    const file = path.join(home, 'stale-halt.yaml');
    fs.writeFileSync(file, RULE.replace('refund-needs-lookup', 'stale-halt'));
    expect(await main(['checks', 'save', 'stale-halt.yaml'], cli())).toBe(0);
    expect(await main(['checks', 'halt', 'stale-halt'], cli())).toBe(0);
    const warning =
      'check stale-halt halted; the YAML saved has no action: halt, so it now only flags: add action: halt to keep it halting, or run neatroots checks halt stale-halt';

    // The local file, edited (its title) but never told about the halt: validate says what saving would do.
    fs.writeFileSync(file, RULE.replace('refund-needs-lookup', 'stale-halt').replace('title: Refund', 'title: Edited refund'));
    const validated = await api<{ warnings: string[] }>('POST', `/v1/projects/${PROJECT}/checks/validate`, { yaml: fs.readFileSync(file, 'utf8'), by: 'cli' });
    expect(validated.body.warnings).toContain(
      'check stale-halt halts; this YAML has no action: halt, so saving it makes it only flag: add action: halt to keep it halting',
    );

    const save = cli();
    expect(await main(['checks', 'save', 'stale-halt.yaml'], save)).toBe(0);
    expect(save.lines).toEqual(['replaced check stale-halt in project shop (in effect)']);
    expect(save.errors).toEqual([`warning: ${warning}`]);
    // Stored as written: it flags now.
    const got = await api<{ check: { action: string; title: string } }>('GET', `/v1/projects/${PROJECT}/checks/stale-halt`);
    expect(got.body.check).toMatchObject({ action: 'flag', title: 'Edited refund without an order lookup' });

    // The API's answer carries it too (PUT as POST), and only while the check replaced halted.
    await api('POST', `/v1/projects/${PROJECT}/checks/stale-halt/halt`, { by: 'cli' });
    const put = await api<{ warnings: string[]; check: { action: string } }>('PUT', `/v1/projects/${PROJECT}/checks/stale-halt`, { yaml: fs.readFileSync(file, 'utf8'), by: 'app' });
    expect(put.body).toMatchObject({ check: { action: 'flag' }, warnings: [warning] });
    const again = await api<{ warnings: string[] }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: fs.readFileSync(file, 'utf8'), by: 'cli' });
    expect(again.body.warnings).toEqual([]);
    // Saving it with action: halt keeps it halting, without a word.
    await api('POST', `/v1/projects/${PROJECT}/checks/stale-halt/halt`, { by: 'cli' });
    const kept = await api<{ warnings: string[]; check: { action: string } }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: fs.readFileSync(file, 'utf8') + 'action: halt\n', by: 'cli' });
    expect(kept.body).toMatchObject({ check: { action: 'halt' }, warnings: [] });
    await api('DELETE', `/v1/projects/${PROJECT}/checks/stale-halt`);
  });

  it('prints each problem of an invalid check as FILE:LINE and exits 1; a refused halt exits 1 with the reason', async () => {
    fs.writeFileSync(path.join(home, 'bad.yaml'), RULE.replace('requires: { tool: [lookup_order] }', 'requires: { tool: [lookup_order] }\n  at_least: 2'));
    const save = cli();
    expect(await main(['checks', 'save', 'bad.yaml'], save)).toBe(1);
    // Each problem once: the call and its status, then one FILE:LINE line per problem.
    expect(save.errors).toEqual([
      `neatroots checks: POST ${base}/v1/projects/${PROJECT}/checks: 400 invalid_check`,
      'bad.yaml:9: check refund-needs-lookup: rule.at_least: unknown key for a requires_before rule; expected one of type, call, requires',
    ]);
    const halt = cli();
    expect(await main(['checks', 'halt', 'repeated-tool-call'], halt)).toBe(1);
    expect(halt.errors.join('\n')).toMatch(/409 refused: check repeated-tool-call is a library check/);
  });
});

describe('a person\'s checks in files, a coding agent, and what a halt answer says', () => {
  /** create_check as a coding agent, through the MCP tools over streamable HTTP. */
  async function agentCreates(yaml: string): Promise<{ error?: string; value?: Record<string, unknown> }> {
    const client = new Client({ name: 'authoring-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
    try {
      const r = (await client.callTool({ name: 'create_check', arguments: { yaml } })) as { isError?: boolean; content: { text: string }[] };
      const text = r.content.map((c) => c.text).join('\n');
      return r.isError ? { error: text } : { value: JSON.parse(text) as Record<string, unknown> };
    } finally {
      await client.close();
    }
  }

  it('refuses a coding agent (MCP) a check with the id of a person\'s rule in a file (yours or the project\'s), naming the file', async () => {
    const userFile = path.join(home, 'checks', 'my-refund-rule.yaml');
    const projectDir = fs.mkdtempSync(path.join(home, 'project-'));
    const projectFile = path.join(projectDir, '.neatroots', 'checks', 'project-refund-rule.yaml');
    const laterFile = path.join(home, 'checks', 'agent-first-rule.yaml');
    fs.mkdirSync(path.dirname(userFile), { recursive: true });
    fs.mkdirSync(path.dirname(projectFile), { recursive: true });
    fs.writeFileSync(userFile, RULE.replace('refund-needs-lookup', 'my-refund-rule'));
    fs.writeFileSync(projectFile, RULE.replace('refund-needs-lookup', 'project-refund-rule'));
    registerProject(home, { name: PROJECT, path: projectDir, steering: false });
    try {
      await app.reloadChecks();
      for (const [id, file, source] of [['my-refund-rule', userFile, 'user'], ['project-refund-rule', projectFile, 'project']] as const) {
        const r = await agentCreates(RULE.replace('refund-needs-lookup', id).replace('title: Refund', 'title: Changed'));
        expect(r.error).toBe(`forbidden: check ${id} is a person's check in ${file}; a coding agent cannot replace it`);
        // The person's rule is still the one in effect, and nothing was stored.
        expect(app.checks().checks.filter((c) => c.id === id)).toEqual([expect.objectContaining({ source, file, title: 'Refund without an order lookup' })]);
        expect((await app.review.data.checkRecords(PROJECT)).map((x) => x.id)).not.toContain(id);
      }
      // An agent's check a person then wrote a file for: the agent cannot change it any more.
      expect((await agentCreates(RULE.replace('refund-needs-lookup', 'agent-first-rule'))).value).toMatchObject({ check: { origin: 'agent', in_effect: true } });
      fs.writeFileSync(laterFile, RULE.replace('refund-needs-lookup', 'agent-first-rule'));
      await app.reloadChecks();
      const later = await agentCreates(RULE.replace('refund-needs-lookup', 'agent-first-rule').replace('title: Refund', 'title: Changed'));
      expect(later.error).toBe(`forbidden: check agent-first-rule is a person's check in ${laterFile}; a coding agent cannot replace it`);
      // A flag rule of the agent's own, and a person saving over their file, are still allowed.
      expect((await agentCreates(RULE.replace('refund-needs-lookup', 'agent-own-rule'))).value).toMatchObject({ check: { origin: 'agent', in_effect: true } });
      const person = await api<{ check: { source: string; origin: string } }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('refund-needs-lookup', 'my-refund-rule'), by: 'cli' });
      expect(person).toMatchObject({ status: 200, body: { check: { source: 'database', origin: 'cli' } } });
    } finally {
      for (const id of ['my-refund-rule', 'agent-first-rule', 'agent-own-rule']) await app.review.data.deleteCheck(PROJECT, id);
      fs.rmSync(userFile, { force: true });
      fs.rmSync(laterFile, { force: true });
      fs.rmSync(path.join(home, 'projects.json'), { force: true });
      fs.rmSync(projectDir, { recursive: true, force: true });
      await app.reloadChecks();
    }
  });

  it('keeps a check saved in one project in effect there when another project has a halt rule with the same id', async () => {
    const otherDir = fs.mkdtempSync(path.join(home, 'other-project-'));
    const haltFile = path.join(otherDir, '.neatroots', 'checks', 'shared-id.yaml');
    fs.mkdirSync(path.dirname(haltFile), { recursive: true });
    fs.writeFileSync(haltFile, RULE.replace('refund-needs-lookup', 'shared-id') + 'action: halt\n');
    registerProject(home, { name: 'other', path: otherDir, steering: false });
    try {
      await app.reloadChecks();
      const saved = await api<{ check: { source: string; in_effect: boolean } }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('refund-needs-lookup', 'shared-id'), by: 'cli' });
      expect(saved).toMatchObject({ status: 200, body: { check: { source: 'database', in_effect: true } } });
      const list = await api<{ checks: { id: string; source: string; in_effect: boolean; error?: string }[] }>('GET', `/v1/projects/${PROJECT}/checks`);
      expect(list.body.checks.filter((c) => c.id === 'shared-id')).toEqual([expect.objectContaining({ source: 'database', in_effect: true })]);
      expect(app.checks().warnings.join('\n')).not.toMatch(/shared-id: ignored/);
      // The other project keeps its halt rule.
      const other = await api<{ checks: { id: string; source: string; action: string }[] }>('GET', '/v1/projects/other/checks', undefined, OTHER_KEY);
      expect(other.body.checks.filter((c) => c.id === 'shared-id')).toEqual([expect.objectContaining({ source: 'project', action: 'halt' })]);
    } finally {
      await app.review.data.deleteCheck(PROJECT, 'shared-id');
      fs.rmSync(path.join(home, 'projects.json'), { force: true });
      fs.rmSync(otherDir, { recursive: true, force: true });
      await app.reloadChecks();
    }
  });

  it('answers steering for a rule that now halts, whatever its action line looks like (a comment, quotes)', async () => {
    const commented = RULE.replace('refund-needs-lookup', 'commented-rule') + 'action: flag # or halt\n';
    expect((await api('POST', `/v1/projects/${PROJECT}/checks`, { yaml: commented, by: 'cli' })).status).toBe(200);
    const halted = await api<{ check: { action: string; yaml: string }; steering?: boolean }>('POST', `/v1/projects/${PROJECT}/checks/commented-rule/halt`, { by: 'cli' });
    expect(halted.status).toBe(200);
    expect(halted.body.check.yaml).toMatch(/^action: halt # or halt$/m);
    expect(halted.body).toMatchObject({ check: { action: 'halt' }, steering: false });

    const quoted = await api<{ check: { action: string }; steering?: boolean }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('refund-needs-lookup', 'quoted-halt') + 'action: "halt"\n', by: 'cli' });
    expect(quoted.body).toMatchObject({ check: { action: 'halt' }, steering: false });
    // A flag rule's answer says nothing of steering.
    const flag = await api<{ steering?: boolean }>('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE.replace('refund-needs-lookup', 'plain-flag') + 'action: flag # not halt\n', by: 'cli' });
    expect(flag.status).toBe(200);
    expect(flag.body.steering).toBeUndefined();
  });

  it('neatroots checks halt says steering is off for a rule whose action line has a comment', async () => {
    fs.writeFileSync(path.join(home, 'commented-cli.yaml'), RULE.replace('refund-needs-lookup', 'commented-cli') + 'action: flag # or halt\n');
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l), env: { NEATROOTS_URL: base, NEATROOTS_API_KEY: KEY, NEATROOTS_PROJECT: PROJECT }, cwd: home };
    expect(await main(['checks', 'save', 'commented-cli.yaml'], io)).toBe(0);
    lines.length = 0;
    expect(await main(['checks', 'halt', 'commented-cli'], io)).toBe(0);
    expect(lines).toEqual(['check commented-cli now halts in project shop', expect.stringMatching(/^steering is off in project shop/)]);
  });

  it('neatroots checks halt --help says a rule a coding agent saved can be switched, and which checks are refused', async () => {
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l), env: {}, cwd: home };
    expect(await main(['checks', 'halt', '--help'], io)).toBe(0);
    const help = lines.join('\n').replace(/\s+/g, ' ');
    expect(help).toMatch(/a flag rule a coding agent saved can be switched too/i);
    expect(help).toMatch(/a check the planner wrote \(save it as your own first\)/);
    expect(help).not.toMatch(/a coding agent or the planner wrote/);
  });
});

describe('a rule a person saved and switched to halt, in a project with steering on', () => {
  let steered: EmbeddedApp;
  let steeredHome: string;
  beforeAll(async () => {
    steeredHome = tempHome('neatroots-authoring-halt');
    steered = await startEmbedded({
      // The pre-call check's wait is the server's (PreCheckPolicy): the default 50 ms, on a loaded
      // CI machine, runs out and the call goes ahead unchecked (fail-open), which is not what this
      // test is about.
      config: testConfig(steeredHome, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_STEERING: PROJECT, NEATROOTS_PRECHECK_TIMEOUT_MS: '10000' }),
      inMemoryDb: true,
      watch: false,
      log: createLogger({ level: 'error' }),
    });
  }, 60_000);
  afterAll(async () => {
    await steered?.close();
    fs.rmSync(steeredHome, { recursive: true, force: true });
  });

  it('halts the agent: the call it names is stopped before it runs', async () => {
    const call = jsonApi(() => `http://127.0.0.1:${steered.httpPort}`, KEY);
    expect((await call('POST', `/v1/projects/${PROJECT}/checks`, { yaml: RULE, by: 'cli' })).status).toBe(200);
    const halted = await call<{ steering: boolean }>('POST', `/v1/projects/${PROJECT}/checks/refund-needs-lookup/halt`, { by: 'cli' });
    expect(halted).toMatchObject({ status: 200, body: { steering: true } });
    // The policy's asking given time too (1 s by default): unanswered, no call is checked.
    const client = new NeatrootsClient({ address: `127.0.0.1:${steered.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20, precheckPolicyTimeoutMs: 10_000 });
    try {
      const run = client.startRun({ workflow: 'refunds', tools: [{ name: 'lookup_order' }, { name: 'issue_refund' }] });
      const refunded: number[] = [];
      await expect(run.toolCall('issue_refund', { order: 7 }, () => refunded.push(7))).rejects.toBeInstanceOf(RunHaltedError);
      expect(refunded).toEqual([]);
      expect(run.haltNote).toMatchObject({ kind: 'halt', check_id: 'refund-needs-lookup' });
      await run.end();
      // With the lookup first, the same call goes through.
      const fine = client.startRun({ workflow: 'refunds' });
      await fine.toolCall('lookup_order', { order: 7 }, () => 'order 7');
      expect(await fine.toolCall('issue_refund', { order: 7 }, () => 'refunded')).toBe('refunded');
      await fine.end();
    } finally {
      await client.close();
    }
  }, 60_000);
});
