import * as fs from 'node:fs';
import * as path from 'node:path';
import { compileInstructions } from './instructions';
import { parseProcedure } from './procedure';
import type { Agent, Compiled, Group, Issue, Procedure } from './types';
import { parseAgentFile, parseGroupFile, type AgentFile, type Ref } from './yaml-files';

/**
 * sopc's compiler: a procedures folder (as files, path -> text) to procedures, agents and
 * groups, with every problem in the folder. It never stops at the first problem and never
 * throws on content. The result is meaningful only when `errors` is empty.
 *
 *   procedures/<id>.md     agents/<name>.yaml     groups/<name>.yaml
 */

/** ids and names: lower-case letters, digits and hyphens (they appear in URLs and file names). */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9-]*$/;

const FOLDERS = { procedures: '.md', agents: '.yaml', groups: '.yaml' } as const;
type Folder = keyof typeof FOLDERS;

/** Thrown by compileFolder for a folder that cannot be read at all (not for its content). */
export class FolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FolderError';
  }
}

export function compileFiles(files: ReadonlyMap<string, string> | Readonly<Record<string, string>>): Compiled {
  const entries = files instanceof Map ? [...files.entries()] : Object.entries(files as Record<string, string>);
  const errors: Issue[] = [];
  const procedures: Procedure[] = [];
  const agentFiles: { name: string; file: string; agent: AgentFile }[] = [];
  const groupFiles: { name: string; file: string; procedures: Ref[] }[] = [];

  for (const [raw, content] of entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const file = raw.split(path.sep).join('/').replace(/^\.\//, '');
    const where = classify(file);
    if ('problem' in where) {
      errors.push({ file, line: 1, message: where.problem });
      continue;
    }
    if (where.folder === 'procedures') {
      const p = parseProcedure(file, where.name, content);
      procedures.push(p.procedure);
      errors.push(...p.issues);
    } else if (where.folder === 'agents') {
      const a = parseAgentFile(file, content);
      agentFiles.push({ name: where.name, file, agent: a.agent });
      errors.push(...a.issues);
    } else {
      const g = parseGroupFile(file, content);
      groupFiles.push({ name: where.name, file, procedures: g.group.procedures });
      errors.push(...g.issues);
    }
  }

  const byId = new Map(procedures.map((p) => [p.procedure_id, p]));
  const groupsByName = new Map(groupFiles.map((g) => [g.name, g]));
  const missingProcedure = (file: string, r: Ref) => {
    if (!byId.has(r.name)) errors.push({ file, line: r.line, message: `unknown procedure "${r.name}" (no procedures/${r.name}.md)` });
    return byId.has(r.name);
  };

  const groups: Group[] = groupFiles.map((g) => ({
    group: g.name,
    procedures: g.procedures.filter((r) => missingProcedure(g.file, r)).map((r) => r.name),
  }));
  const agents: Agent[] = agentFiles.map(({ name, file, agent }) => {
    const ids: string[] = [];
    const add = (id: string) => {
      if (!ids.includes(id)) ids.push(id);
    };
    agent.procedures.filter((r) => missingProcedure(file, r)).forEach((r) => add(r.name));
    for (const g of agent.groups) {
      const group = groupsByName.get(g.name);
      if (!group) errors.push({ file, line: g.line, message: `unknown group "${g.name}" (no groups/${g.name}.yaml)` });
      else group.procedures.filter((r) => byId.has(r.name)).forEach((r) => add(r.name));
    }
    return {
      agent: name,
      procedures: ids,
      instructions: compileInstructions(agent.instructions, ids.map((id) => byId.get(id)!)),
      own_instructions: agent.instructions,
      groups: agent.groups.map((g) => g.name),
    };
  });

  errors.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line));
  return { procedures, agents, groups, errors };
}

/** Reads DIR's procedures/, agents/ and groups/ (other files, lock.json included, are not read). */
export function compileFolder(dir: string): Compiled {
  return compileFiles(readFolder(dir));
}

export function readFolder(dir: string): Map<string, string> {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new FolderError(`${dir}: no such folder`);
  }
  if (!st.isDirectory()) throw new FolderError(`${dir}: not a folder`);
  const present = (Object.keys(FOLDERS) as Folder[]).filter((f) => fs.existsSync(path.join(dir, f)));
  if (!present.length) throw new FolderError(`${dir}: not a procedures folder (it has no procedures/, agents/ or groups/)`);
  const files = new Map<string, string>();
  for (const folder of present) {
    const sub = path.join(dir, folder);
    if (!fs.statSync(sub).isDirectory()) throw new FolderError(`${sub}: not a folder (${folder}/ holds the ${folder === 'procedures' ? '.md' : '.yaml'} files)`);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(sub, { withFileTypes: true });
    } catch (e) {
      throw new FolderError(`${sub}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    for (const entry of entries) {
      if (entry.name.startsWith('.')) continue; // editor and OS files (.DS_Store, swap files)
      const rel = `${folder}/${entry.name}`;
      // A sub-folder is reported (as a bad file name), not silently skipped.
      if (entry.isDirectory()) files.set(`${rel}/`, '');
      else files.set(rel, fs.readFileSync(path.join(dir, rel), 'utf8'));
    }
  }
  return files;
}

function classify(file: string): { folder: Folder; name: string } | { problem: string } {
  const parts = file.split('/');
  const folder = parts[0] as Folder;
  if (!(folder in FOLDERS)) {
    return { problem: 'not a file of a procedures folder (procedures/<id>.md, agents/<name>.yaml, groups/<name>.yaml)' };
  }
  const ext = FOLDERS[folder];
  const what = folder === 'procedures' ? 'id' : 'name';
  if (parts.length !== 2 || !parts[1]) return { problem: `bad file name: ${folder}/ holds files directly (${folder}/<${what}>${ext})` };
  if (!parts[1].endsWith(ext)) return { problem: `bad file name: files in ${folder}/ end in ${ext}` };
  const name = parts[1].slice(0, -ext.length);
  if (!NAME_PATTERN.test(name)) {
    return { problem: `bad file name: the ${what} "${name}" must be lower-case letters, digits and hyphens` };
  }
  return { folder, name };
}
