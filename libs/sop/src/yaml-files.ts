import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';
import type { Issue } from './types';

/**
 * agents/<name>.yaml (instructions, procedures, groups) and groups/<name>.yaml (procedures).
 * Reads one file into names with their lines, so that a reference to a missing procedure or
 * group can be reported where it is written. Unknown keys and wrong types are errors, never
 * ignored: a misspelt `procedure:` would otherwise silently leave an agent unchecked.
 */
export interface Ref {
  name: string;
  line: number;
}

export interface AgentFile {
  instructions: string;
  procedures: Ref[];
  groups: Ref[];
}

export interface GroupFile {
  procedures: Ref[];
}

const AGENT_KEYS = ['instructions', 'procedures', 'groups'];
const GROUP_KEYS = ['procedures'];

export function parseAgentFile(file: string, content: string): { agent: AgentFile; issues: Issue[] } {
  const r = readMap(file, content, AGENT_KEYS, 'instructions: text; procedures: [ids]; groups: [names]');
  const agent: AgentFile = { instructions: '', procedures: [], groups: [] };
  const ins = r.fields.get('instructions');
  if (ins) {
    if (isScalar(ins) && typeof ins.value === 'string') agent.instructions = ins.value.trim();
    else r.issues.push({ file, line: r.line(ins), message: 'instructions: expected text' });
  }
  agent.procedures = r.list('procedures', 'procedure id');
  agent.groups = r.list('groups', 'group name');
  return { agent, issues: r.issues };
}

export function parseGroupFile(file: string, content: string): { group: GroupFile; issues: Issue[] } {
  const r = readMap(file, content, GROUP_KEYS, 'procedures: [ids]');
  return { group: { procedures: r.list('procedures', 'procedure id') }, issues: r.issues };
}

function readMap(file: string, content: string, keys: string[], shape: string) {
  const lc = new LineCounter();
  const issues: Issue[] = [];
  const fields = new Map<string, Node>();
  const line = (node: Node | null | undefined) => (node?.range ? lc.linePos(node.range[0]).line : 1);
  const doc = parseDocument(content, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  for (const e of [...doc.errors, ...doc.warnings]) {
    issues.push({ file, line: e.linePos?.[0].line ?? lc.linePos(e.pos[0]).line, message: `YAML: ${firstLine(e.message)}` });
  }
  if (!doc.errors.length) {
    const root = doc.contents;
    if (root === null || (isScalar(root) && root.value === null)) {
      issues.push({ file, line: 1, message: `empty file: expected ${shape}` });
    } else if (!isMap(root)) {
      issues.push({ file, line: line(root), message: `expected a mapping (${shape})` });
    } else {
      for (const pair of root.items) {
        const k = isScalar(pair.key) ? String(pair.key.value) : null;
        const at = line(pair.key as Node);
        if (k === null || !keys.includes(k)) {
          issues.push({ file, line: at, message: `unknown key "${k ?? '?'}" (known: ${keys.join(', ')})` });
          continue;
        }
        fields.set(k, (pair.value as Node | null) ?? ({ range: (pair.key as Node).range } as Node));
      }
    }
  }
  const list = (key: string, what: string): Ref[] => {
    const node = fields.get(key);
    if (!node) return [];
    if (!isSeq(node)) {
      issues.push({ file, line: line(node), message: `${key}: expected a list of ${what}s` });
      return [];
    }
    const out: Ref[] = [];
    for (const el of node.items) {
      const at = line(el as Node);
      if (!isScalar(el) || typeof el.value !== 'string' || !el.value.trim()) {
        issues.push({ file, line: at, message: `${key}: expected a ${what}, got ${describe(el)}` });
        continue;
      }
      const name = el.value.trim();
      const dup = out.find((r) => r.name === name);
      if (dup) issues.push({ file, line: at, message: `${key}: "${name}" is listed twice (first at line ${dup.line})` });
      else out.push({ name, line: at });
    }
    return out;
  };
  return { fields, issues, line, list };
}

function describe(el: unknown): string {
  if (isScalar(el)) return el.value === null ? 'nothing' : `${typeof el.value} ${JSON.stringify(el.value)}`;
  if (isMap(el)) return 'a mapping';
  if (isSeq(el)) return 'a list';
  return 'nothing';
}

function firstLine(s: string): string {
  return s.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
}
