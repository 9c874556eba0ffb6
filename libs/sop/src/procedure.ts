import { splitAnnotation } from './annotations';
import { collapse, contentVersion, ruleId } from './ids';
import type { Issue, Procedure, Rule, RuleKind } from './types';

/**
 * The procedure Markdown reader: `# Title`, optional `Goal:` and `Applies when:` lines, then
 * `## Steps` (numbered), `## Never` and `## Warning signs` (bulleted). It never throws: every
 * problem is an Issue with its line, and it keeps reading after one so that a save shows all
 * of them at once. The procedure it returns is meaningful only when there are no issues.
 */
export interface ParsedProcedure {
  procedure: Procedure;
  issues: Issue[];
}

const SECTIONS: Record<string, RuleKind> = { steps: 'step', never: 'never', 'warning signs': 'warning' };
const SECTION_TITLE: Record<RuleKind, string> = { step: '## Steps', never: '## Never', warning: '## Warning signs' };
const KIND_WORD: Record<RuleKind, string> = { step: 'step', never: 'never rule', warning: 'warning sign' };

const HEADING = /^(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const NUMBERED = /^ ?(\d{1,9})[.)](?:\s+(.*))?$/;
const BULLET = /^ ?[-*+](?:\s+(.*))?$/;
const NESTED = /^\s{2,}(?:\d{1,9}[.)]|[-*+])(?:\s|$)/;
const META = /^(goal|applies when)\s*:\s*(.*)$/i;
const NO_TITLE = 'a procedure starts with its # title';

interface Item {
  kind: RuleKind;
  line: number;
  parts: string[];
}

export function parseProcedure(file: string, id: string, content: string): ParsedProcedure {
  const issues: Issue[] = [];
  const issue = (line: number, message: string) => issues.push({ file, line, message });
  const lines = content.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/);

  let name: string | null = null;
  const meta: Record<'goal' | 'applies when', { text: string; line: number } | null> = { goal: null, 'applies when': null };
  let openMeta: 'goal' | 'applies when' | null = null;
  let section: RuleKind | 'unknown' | null = null;
  const sectionLine = new Map<RuleKind, number>();
  const counts = new Map<RuleKind, number>();
  const items: Item[] = [];
  let item: Item | null = null;
  let afterBlank = false;
  let seenContent = false;

  lines.forEach((raw, i) => {
    const n = i + 1;
    // trimEnd, not /\s+$/: the regex takes time in the square of a long run of spaces inside a line.
    const line = raw.trimEnd();
    if (!line.trim()) {
      afterBlank = true;
      openMeta = null;
      return;
    }
    const first = !seenContent;
    seenContent = true;
    const h = HEADING.exec(line);
    if (h) {
      item = null;
      openMeta = null;
      const title = collapse(h[2] ?? '');
      if (h[1].length === 1) {
        if (!first) issue(n, name === null ? 'the # title must be the first line' : `a second # title (the first is "${name}")`);
        if (!title) issue(n, 'empty # title');
        if (name === null) name = title;
        return;
      }
      if (first) issue(n, NO_TITLE);
      const kind = h[1].length === 2 ? SECTIONS[title.toLowerCase()] : undefined;
      if (!kind) {
        issue(n, `unknown section "${line.trim()}" (known: ## Steps, ## Never, ## Warning signs)`);
        section = 'unknown';
        return;
      }
      const prev = sectionLine.get(kind);
      if (prev !== undefined) issue(n, `${SECTION_TITLE[kind]} appears twice (first at line ${prev})`);
      else sectionLine.set(kind, n);
      section = kind;
      afterBlank = false;
      return;
    }
    if (first) issue(n, NO_TITLE);
    if (section === 'unknown') return; // reported at its heading; its content is not read
    if (section === null) {
      const m = META.exec(line.trim());
      if (m) {
        const key = m[1].toLowerCase().replace(/\s+/g, ' ') as 'goal' | 'applies when';
        const label = key === 'goal' ? 'Goal:' : 'Applies when:';
        const prev = meta[key];
        if (prev) issue(n, `a second ${label} (the first is at line ${prev.line})`);
        else meta[key] = { text: collapse(m[2]), line: n };
        openMeta = prev ? null : key;
        return;
      }
      if (openMeta && !afterBlank) {
        const m2 = meta[openMeta]!;
        m2.text = collapse(`${m2.text} ${line}`);
        return;
      }
      if (first) return;
      issue(n, 'unexpected text before the first section (only Goal: and Applies when: go here)');
      return;
    }
    if (NESTED.test(line)) {
      issue(n, 'nested list item: each rule is one item of its section\'s list');
      return;
    }
    const num = NUMBERED.exec(line);
    const bul = num ? null : BULLET.exec(line);
    if (num || bul) {
      if (section === 'step' && bul) issue(n, '## Steps is a numbered list ("1. ...")');
      if (section !== 'step' && num) issue(n, `${SECTION_TITLE[section]} is a bulleted list ("- ...")`);
      item = { kind: section, line: n, parts: [((num ? num[2] : bul![1]) ?? '')] };
      items.push(item);
      afterBlank = false;
      return;
    }
    if (item && (!afterBlank || /^\s/.test(line))) {
      (item as Item).parts.push(line);
      afterBlank = false;
      return;
    }
    issue(n, `text outside a list item in ${SECTION_TITLE[section]}`);
  });

  if (name === null && !issues.some((x) => x.message === NO_TITLE)) issue(1, NO_TITLE);
  if (meta.goal && !meta.goal.text) issue(meta.goal.line, 'empty Goal:');
  if (meta['applies when'] && !meta['applies when'].text) issue(meta['applies when'].line, 'empty Applies when:');
  for (const [kind, line] of sectionLine) {
    if (!items.some((it) => it.kind === kind)) issue(line, `${SECTION_TITLE[kind]} has no items`);
  }

  const rules: Rule[] = [];
  const seen = new Map<string, number>();
  for (const it of items) {
    const rule = toRule(it, counts, (m) => issue(it.line, m));
    if (!rule) continue;
    const key = `${rule.kind}\n${rule.text}`;
    const dup = seen.get(key);
    if (dup !== undefined) issue(it.line, `duplicate ${KIND_WORD[rule.kind]}: the same text as line ${dup}`);
    else seen.set(key, it.line);
    rules.push(rule);
  }
  const order: RuleKind[] = ['step', 'never', 'warning'];
  rules.sort((a, b) => order.indexOf(a.kind) - order.indexOf(b.kind) || a.index - b.index);

  issues.sort((a, b) => a.line - b.line);
  return {
    procedure: {
      procedure_id: id,
      name: name || id,
      version: contentVersion(content),
      goal: meta.goal?.text || null,
      applies_when: meta['applies when']?.text || null,
      rules,
    },
    issues,
  };
}

function toRule(it: Item, counts: Map<RuleKind, number>, issue: (m: string) => void): Rule | null {
  const { body, annotation, problems } = splitAnnotation(it.parts.join(' '));
  problems.forEach(issue);
  let text = body;
  let action: string | null = null;
  if (it.kind === 'warning') {
    const arrow = body.indexOf('->');
    if (arrow >= 0) {
      text = collapse(body.slice(0, arrow));
      action = collapse(body.slice(arrow + 2));
      if (!action) issue('empty action after "->"');
    }
  }
  if (annotation && it.kind !== 'step') {
    if (annotation.when !== null) issue('"when:" belongs to steps only');
    if (annotation.tool !== null) issue('"tool:" belongs to steps only');
    if (annotation.required) issue('"required" belongs to steps only');
  }
  if (!text) {
    issue(`empty ${KIND_WORD[it.kind]}`);
    return null;
  }
  const index = (counts.get(it.kind) ?? 0) + 1;
  counts.set(it.kind, index);
  const step = it.kind === 'step';
  return {
    rule_id: ruleId(it.kind, text),
    kind: it.kind,
    index,
    text,
    tool: step ? (annotation?.tool ?? null) : null,
    required: step ? (annotation?.required ?? false) : false,
    when: step ? (annotation?.when ?? null) : null,
    action: it.kind === 'warning' ? action || null : null,
    line: it.line,
  };
}
