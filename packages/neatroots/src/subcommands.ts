import { FolderError, SessionError } from '@neatroots/sop';
import { CommandError, parseArgs, UsageError, version } from './args';
import type { Command, Io } from './cli';

/**
 * The dispatcher of the sopc and sopops programs: `PROG COMMAND [args]`, `PROG --help`,
 * `PROG COMMAND --help` (`PROG help COMMAND`), `PROG --version`. A command is a cli.ts Command in its own file; adding one is that
 * file and one line in the program's table. (cli.ts keeps its own main for `neatroots`.)
 */
export const processIo: Io = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
  write: (t) => process.stdout.write(t),
  env: process.env,
  cwd: process.cwd(),
};

export interface Program {
  name: string;
  about: string;
  commands: Record<string, Command>;
}

export async function runProgram(prog: Program, argv: readonly string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    io.out(version());
    return 0;
  }
  // No command is a usage error: the help on standard error, exit 2; asked for, on standard output.
  if (!name) {
    io.err(help(prog));
    return 2;
  }
  if (name === '--help' || name === '-h' || (name === 'help' && !rest.length)) {
    io.out(help(prog));
    return 0;
  }
  // `help COMMAND` is `COMMAND --help`.
  if (name === 'help') return runProgram(prog, [...rest, '--help'], io);
  const cmd = prog.commands[name];
  if (!cmd) {
    io.err(`${prog.name}: unknown command "${name}"\n\n${help(prog)}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(`Usage: ${cmd.usage}\n\n${cmd.help}`);
    return 0;
  }
  try {
    return await cmd.run(parseArgs(rest, cmd.flags), io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`${prog.name} ${name}: ${e.message}\nUsage: ${cmd.usage}`);
      return 2;
    }
    const code = (e as NodeJS.ErrnoException).code;
    if (e instanceof CommandError || e instanceof FolderError || e instanceof SessionError || code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR' || code === 'ENOTDIR') {
      io.err(`${prog.name} ${name}: ${(e as Error).message}`);
      return 2;
    }
    throw e;
  }
}

function help(prog: Program): string {
  const width = Math.max(...Object.keys(prog.commands).map((n) => n.length));
  const lines = Object.entries(prog.commands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`);
  return `${prog.about}\n\nUsage: ${prog.name} COMMAND [options]\n\nCommands:\n${lines.join('\n')}\n\n${prog.name} COMMAND --help (or ${prog.name} help COMMAND) shows a command's options, ${prog.name} --version the version.`;
}
