import * as fs from 'node:fs';
import * as path from 'node:path';
import { compileFolder, formatIssue, lockText } from '@neatroots/sop';
import { CommandError, UsageError, type Parsed } from './args';
import type { Command, Io } from './cli';
import { processIo, runProgram, type Program } from './subcommands';

/** `sopc`: the procedures-folder compiler (compile, export). See docs/procedures.md. */

function folderArg(p: Parsed): string {
  if (p.positional.length !== 1) throw new UsageError(p.positional.length ? `one folder, got ${p.positional.length}` : 'no folder given');
  return p.positional[0];
}

const FOLDER_HELP = `DIR is a procedures folder:
  procedures/<id>.md     one procedure (the format: docs/procedures.md)
  agents/<name>.yaml     instructions: text; procedures: [ids]; groups: [names]
  groups/<name>.yaml     procedures: [ids]`;

export const compileCommand: Command = {
  usage: 'sopc compile DIR',
  summary: 'check a procedures folder and print every error',
  help: `Compiles the folder and prints every problem in it, one a line, as FILE:LINE: message
(FILE relative to DIR): unknown sections and annotations, empty items, the same text twice in
one kind, references to missing procedures or groups, a when: outside Steps, bad file names,
YAML errors, unknown keys and wrong types.

${FOLDER_HELP}

Exit status: 0 (nothing printed) when the folder compiles; 1 with every error on standard
output; 2 when DIR cannot be read (the reason on standard error).`,
  flags: {},
  async run(p, io) {
    const c = compileFolder(path.resolve(io.cwd, folderArg(p)));
    for (const issue of c.errors) io.out(formatIssue(issue));
    return c.errors.length ? 1 : 0;
  },
};

export const exportCommand: Command = {
  usage: 'sopc export DIR [--out FILE]',
  summary: 'compile a procedures folder and write lock.json',
  help: `Compiles the folder and writes lock.json: every procedure with its rules (rule_id, kind,
index, text, tool, required, when, action) and every agent with its procedures (its own, then
its groups', each once) and its instructions with those procedures compiled in.

${FOLDER_HELP}

Options:
  --out FILE   where to write it (default DIR/lock.json; - for standard output)

The file is replaced whole (written beside it, then renamed over it): a reader sees the old
lock.json or the new one, never half of one.

Exit status: 0; 1 with every error on standard output when the folder does not compile
(nothing is written); 2 when DIR cannot be read or FILE cannot be written (its folder does not
exist, it is a folder), the reason on standard error.`,
  flags: { out: { value: true } },
  async run(p, io) {
    const dir = path.resolve(io.cwd, folderArg(p));
    const c = compileFolder(dir);
    if (c.errors.length) {
      for (const issue of c.errors) io.out(formatIssue(issue));
      return 1;
    }
    const given = typeof p.flags.out === 'string' ? p.flags.out : undefined;
    const out = given ?? path.join(dir, 'lock.json');
    const text = lockText(c);
    if (out === '-') io.out(text.trimEnd());
    else writeLock(path.resolve(io.cwd, out), text, given ? `--out ${given}` : out);
    return 0;
  },
};

/**
 * replaceFile, its failure said of the path the user gave (`said`: `--out FILE`, or DIR/lock.json),
 * never of the hidden file written beside it: a CommandError, exit 2.
 */
function writeLock(file: string, text: string, said: string): void {
  const isFolder = (p: string) => {
    try {
      return fs.statSync(p).isDirectory();
    } catch {
      return undefined;
    }
  };
  if (isFolder(file)) throw new CommandError(`${said} is a folder`);
  try {
    replaceFile(file, text);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const folder = path.dirname(file);
    if (code === 'EISDIR') throw new CommandError(`${said} is a folder`);
    if (code === 'ENOENT' && isFolder(folder) === undefined) throw new CommandError(`cannot write ${said}: its folder ${folder} does not exist`);
    if (code === 'ENOTDIR') {
      // The file in the way, where a folder should be: `plain/lock.json` with plain a file.
      let d = folder;
      while (isFolder(d) === undefined && path.dirname(d) !== d) d = path.dirname(d);
      if (isFolder(d) === false) throw new CommandError(`cannot write ${said}: ${d} is a file, not a folder`);
    }
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') throw new CommandError(`cannot write ${said}: no permission to write in ${folder}`);
    // Any other failure of the write (ENOSPC...): its reason, without the hidden file's name.
    if (code) throw new CommandError(`cannot write ${said}: ${(e as Error).message.split(',')[0]}`);
    throw e;
  }
}

/**
 * Writes `file` whole or not at all: the text goes to a file beside it, synced, then renamed over
 * it (as the window journal's snapshots are), so a reader (a deploy, sopops push) sees the old
 * lock.json or the new one, never half of one, and a failed write leaves the old one. A symbolic
 * link is written through, and an existing file's mode is kept.
 */
function replaceFile(file: string, text: string): void {
  let target = file;
  let mode: number | undefined;
  try {
    target = fs.realpathSync(file);
    mode = fs.statSync(target).mode & 0o7777;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.tmp`);
  try {
    const fd = fs.openSync(tmp, 'w', mode ?? 0o666);
    try {
      fs.writeFileSync(fd, text);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, target);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

export const sopc: Program = {
  name: 'sopc',
  about: 'sopc compiles a folder of procedures (Markdown), agents and groups (YAML).',
  commands: { compile: compileCommand, export: exportCommand },
};

export function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  return runProgram(sopc, argv, io);
}
