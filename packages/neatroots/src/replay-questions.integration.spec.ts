import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { main, type Io } from './cli';

/** `neatroots replay` answers question checks with whatever model is configured. */
let fake: FakeOpenAI;
let dir: string;
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-replay-q-'));
  fs.mkdirSync(path.join(dir, 'checks'));
  fs.writeFileSync(
    path.join(dir, 'checks', 'refund.yaml'),
    `id: refund-claim
kind: yes_no
scope: trace
ask: Does the final response claim a refund was issued that the tools do not show?
evidence: { final_output: true }
when: end
guidance: Only confirm refunds the refund tool confirmed.
`,
  );
  const lines = [
    { event: 'run_start', run_id: 'r1', workflow: 'w', tools: [{ name: 'lookup' }] },
    { run_id: 'r1', span_id: 's1', type: 'tool', tool: 'lookup', input: { order: 7 }, output: 'order 7: refund declined', status: 'ok', start_ms: 1_700_000_000_000, end_ms: 1_700_000_000_100 },
    { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'Your refund for order 7 went through.', ts_ms: 1_700_000_000_200 },
  ];
  fs.writeFileSync(path.join(dir, 'run.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n'));
});
afterAll(async () => {
  await fake.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The built command, as a user runs it: its own process, which must not exit before the answers. */
const CLI = path.resolve(__dirname, '..', 'bin', 'neatroots.js');
function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string[]; err: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], { cwd: dir, env: { PATH: process.env.PATH, NEATROOTS_HOME: path.join(dir, 'home'), ...env } });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, out: out.split('\n').filter(Boolean), err }));
  });
}

function io(env: NodeJS.ProcessEnv): Io & { lines: string[]; errors: string[] } {
  const lines: string[] = [];
  const errors: string[] = [];
  return { out: (l) => lines.push(l), err: (l) => errors.push(l), env: { NEATROOTS_HOME: path.join(dir, 'home'), ...env }, cwd: dir, lines, errors };
}

describe('neatroots replay with question checks', () => {
  it('asks the configured local LLM and prints its findings with the quote', async () => {
    fake.script = (call) =>
      call.kind === 'judge'
        ? judgeReply(call, () => ({ p: 0.97, quote: 'Your refund for order 7 went through.' }))
        : { json: { holds: true, quote: 'Your refund for order 7 went through.' } };
    const o = io({ NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test' });
    const code = await main(['replay', '--no-library', '--checks', 'checks', 'run.jsonl'], o);
    expect(code).toBe(0);
    const findings = o.lines.map((l) => JSON.parse(l));
    expect(findings).toEqual([
      expect.objectContaining({
        check_id: 'refund-claim',
        run_id: 'r1',
        status: 'raised',
        quote: 'Your refund for order 7 went through.',
        probability: 0.9,
        confidence: 'Very likely (LLM judgment)',
        guidance: 'Only confirm refunds the refund tool confirmed.',
      }),
    ]);
    expect(fake.calls.map((c) => c.kind)).toEqual(['judge', 'second_look']);
  });

  it('without a model, the fast classifier answers (a question it has not learnt is not checked, not passed)', async () => {
    fake.calls.length = 0;
    const o = io({});
    expect(await main(['replay', '--no-library', '--checks', 'checks', 'run.jsonl'], o)).toBe(0);
    expect(o.lines).toEqual([]);
    expect(o.errors.join('\n')).toMatch(/not checked: refund-claim in run r1 \(.+\)/);
    expect(fake.calls).toHaveLength(0);
  });

  it('as its own process, waits for the model before exiting and prints the finding', async () => {
    fake.calls.length = 0;
    fake.script = (call) =>
      call.kind === 'judge'
        ? judgeReply(call, () => ({ p: 0.97, quote: 'Your refund for order 7 went through.' }))
        : { json: { holds: true, quote: 'Your refund for order 7 went through.' } };
    // A batching wait longer than the replay itself: the process must stay up for it.
    const r = await runCli(['replay', '--no-library', '--checks', 'checks', 'run.jsonl'], {
      NEATROOTS_LLM_URL: fake.url,
      NEATROOTS_LLM_MODEL: 'llama-test',
      NEATROOTS_QUESTION_BATCH_WAIT_MS: '200',
    });
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: '' });
    expect(r.out.map((l) => JSON.parse(l))).toEqual([expect.objectContaining({ check_id: 'refund-claim', run_id: 'r1', status: 'raised', probability: 0.9 })]);
  }, 30_000);

  it('says which question was not checked when the model fails, and passes nothing', async () => {
    fake.script = () => ({ status: 500, content: 'model down' });
    const r = await runCli(['replay', '--no-library', '--checks', 'checks', 'run.jsonl'], {
      NEATROOTS_LLM_URL: fake.url,
      NEATROOTS_LLM_MODEL: 'llama-test',
      NEATROOTS_QUESTION_RETRIES: '0',
    });
    expect(r.code).toBe(0);
    expect(r.out).toEqual([]);
    expect(r.err).toMatch(/not checked: refund-claim in run r1 \(.+\)/);
  }, 30_000);

  it('exits 2 naming the variable when the model configuration is invalid', async () => {
    const o = io({ NEATROOTS_LLM_URL: fake.url });
    expect(await main(['replay', '--no-library', 'run.jsonl'], o)).toBe(2);
    expect(o.errors.join('\n')).toContain('NEATROOTS_LLM_MODEL');
  });
});
