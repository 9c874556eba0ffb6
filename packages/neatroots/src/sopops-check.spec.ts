import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Io } from './cli';
import { main } from './sopops';

async function run(args: string[], cwd: string): Promise<{ code: number; out: string[]; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, cwd };
  const code = await main(args, io);
  return { code, out, err: err.join('\n') };
}

describe('sopops check', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sopops-'));
    write('procs/procedures/pay.md', '# Pay\n## Steps\n1. Find the order. [tool: lookup_order, required]\n2. Charge the card. [tool: charge_card, required]\n');
    write('procs/agents/bot.yaml', 'procedures: [pay]\n');
    write('procs/agents/other.yaml', 'procedures: [pay]\n');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  function write(rel: string, text: string) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
    return rel;
  }
  const session = (external_id: string, tools: string[], agent: string | null = 'bot') =>
    JSON.stringify({
      external_id, agent,
      turns: [{ role: 'user', text: 'Pay order 1.' }, { role: 'agent', text: 'Done.' }],
      tool_calls: tools.map((tool) => ({ turn: 1, tool, input: {}, output: null, error: null })),
    });

  it('prints one line per session file, in order, each the session body', async () => {
    const a = write('a.json', session('s-a', ['lookup_order', 'charge_card']));
    const b = write('b.json', session('s-b', ['charge_card']));
    const r = await run(['check', '--procedures', 'procs', a, b], dir);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const bodies = r.out.map((l) => JSON.parse(l));
    expect(bodies.map((x) => [x.external_id, x.result])).toEqual([['s-a', 'followed'], ['s-b', 'deviated']]);
    expect(bodies[1].checks[0].rules.map((x: { status: string }) => x.status)).toEqual(['skipped', 'done']);
    expect(bodies[1].checks[0]).toMatchObject({ procedure_id: 'pay', release_id: null, model: null, steps_done: 1 });
  });

  it('prints started_at as the stored session gives it: in UTC, to the millisecond', async () => {
    const body = (started_at: string | null) => JSON.stringify({ ...JSON.parse(session('s', [])), started_at });
    const files = [
      write('a.json', body('2026-11-30T11:00:00+01:00')),
      write('b.json', body('2026-11-30t10:00z')),
      write('c.json', body('2026-11-30T10:00:00.123456Z')),
      write('d.json', body(null)),
    ];
    const r = await run(['check', '--procedures', 'procs', ...files], dir);
    expect(r.err).toBe('');
    expect(r.out.map((l) => JSON.parse(l).started_at)).toEqual(['2026-11-30T10:00:00.000Z', '2026-11-30T10:00:00.000Z', '2026-11-30T10:00:00.123Z', null]);
  });

  it('--agent checks the files as that agent\'s sessions (also those that name none)', async () => {
    const f = write('a.json', session('s', [], null));
    const none = await run(['check', '--procedures', 'procs', f], dir);
    expect(none.code).toBe(2);
    expect(none.err).toContain('a.json: the session names no agent (give one with --agent NAME)');
    const r = await run(['check', '--procedures', 'procs', '--agent', 'other', f], dir);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out[0]).agent).toBe('other');
  });

  it.each([
    ['a missing file', () => 'missing.json', 'missing.json: no such file'],
    ['a file that is not JSON', () => write('x.json', '{"turns": ['), 'x.json: not JSON'],
    ['a session with a bad field', () => write('x.json', JSON.stringify({ agent: 'bot', turns: [{ role: 'bot', text: 'hi' }] })), 'x.json: turns[0].role: expected "user" or "agent", got "bot"'],
    ['a tool call at a turn that does not exist', () => write('x.json', JSON.stringify({ agent: 'bot', turns: [], tool_calls: [{ turn: 0, tool: 't' }] })), 'x.json: tool_calls[0].turn'],
    ['an agent not in the folder', () => write('x.json', session('s', [], 'ghost')), 'x.json: agent "ghost" is not in procs (agents: bot, other)'],
  ])('exits 2 for %s, naming it on standard error, with nothing printed', async (_what, file, message) => {
    const ok = write('ok.json', session('s', []));
    const r = await run(['check', '--procedures', 'procs', ok, file()], dir);
    expect(r.code).toBe(2);
    expect(r.out).toEqual([]);
    expect(r.err).toContain(message);
  });

  it('exits 2 for a folder that does not compile, with its errors', async () => {
    write('procs/procedures/bad.md', '# Bad\n## Stepz\n');
    const f = write('a.json', session('s', []));
    const r = await run(['check', '--procedures', 'procs', f], dir);
    expect(r.code).toBe(2);
    expect(r.err).toBe('sopops check: procs does not compile:\nprocedures/bad.md:2: unknown section "## Stepz" (known: ## Steps, ## Never, ## Warning signs)');
    const missing = await run(['check', '--procedures', 'nope', f], dir);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain('no such folder');
  });

  it('usage errors exit 2; --help explains the command; the program lists its commands', async () => {
    expect((await run(['check', 'a.json'], dir)).err).toContain('--procedures DIR is required');
    expect((await run(['check', '--procedures', 'procs'], dir)).code).toBe(2);
    const help = await run(['check', '--help'], dir);
    expect(help.code).toBe(0);
    expect(help.out.join('\n')).toContain('Usage: sopops check --procedures DIR [--agent NAME] FILE.json...');
    const top = await run(['--help'], dir);
    expect(top.out.join('\n')).toMatch(/check[\s\S]*merge[\s\S]*lineage/);
  });
});
