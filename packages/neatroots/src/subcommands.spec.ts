import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Io } from './cli';
import { main as sopc } from './sopc';
import { main as sopops } from './sopops';

/** sopc and sopops as dispatched by runProgram: help, version and usage errors. */
async function run(prog: typeof sopc, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, cwd: '/' };
  const code = await prog(args, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}
const programs = [
  ['sopc', sopc],
  ['sopops', sopops],
] as const;

it.each(programs)('%s with no arguments is a usage error: its help on standard error, exit 2; asked for, on standard output, exit 0', async (name, prog) => {
  const none = await run(prog, []);
  expect([none.code, none.out]).toEqual([2, '']);
  expect(none.err).toMatch(new RegExp(`\\nUsage: ${name} COMMAND \\[options\\]\\n`));
  for (const ask of [['--help'], ['-h'], ['help']]) expect(await run(prog, ask)).toEqual({ code: 0, out: none.err, err: '' });
});

it.each(programs)('%s --version prints the version, as neatroots --version does', async (_name, prog) => {
  const { version } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-V', 'version']) expect(await run(prog, [flag])).toEqual({ code: 0, out: version, err: '' });
});

it('help COMMAND prints that command\'s help, as COMMAND --help does; help of no such command is a usage error', async () => {
  for (const [prog, cmd] of [[sopc, 'compile'], [sopc, 'export'], [sopops, 'merge'], [sopops, 'pr-status']] as const) {
    const asked = await run(prog, ['help', cmd]);
    expect(asked).toEqual(await run(prog, [cmd, '--help']));
    expect([cmd, asked.code]).toEqual([cmd, 0]);
    expect(asked.out).toMatch(new RegExp(`^Usage: (sopc|sopops) ${cmd}`));
  }
  const nope = await run(sopc, ['help', 'frobnicate']);
  expect([nope.code, nope.out]).toEqual([2, '']);
  expect(nope.err).toMatch(/^sopc: unknown command "frobnicate"/);
});

it('a usage error is said with one prefix: sopops pr-status extra', async () => {
  const r = await run(sopops, ['pr-status', 'extra']);
  expect(r.code).toBe(2);
  expect(r.err.split('\n')[0]).toBe('sopops pr-status: pr-status takes no arguments, got extra');
});
