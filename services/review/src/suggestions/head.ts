import { compileFiles, type Issue, type Procedure } from '@neatroots/sop';
import { compareProcedure, Lineage, LineageCycleError, type LineageLink, type LineageRule } from '@neatroots/review-domain';
import type { SopFile } from '@neatroots/store';

/** A procedure's file at head: procedures/<id>.md (sopc names a procedure after its file). */
export const procedurePath = (procedureId: string): string => `procedures/${procedureId}.md`;

/**
 * sopc's issues with head when `path` reads `text` (the rest of head as it is), plus one when
 * the file no longer defines the procedure: what a proposal, and a merged file, must pass.
 */
export function issuesWith(head: readonly SopFile[], path: string, text: string, procedureId: string): Issue[] {
  const files = new Map(head.map((f) => [f.path, f.text]));
  files.set(path, text);
  const compiled = compileFiles(files);
  const issues = [...compiled.errors];
  if (!compiled.procedures.some((p) => p.procedure_id === procedureId)) issues.push({ file: path, line: 1, message: `the file no longer defines the procedure ${procedureId}` });
  return issues;
}

export function fileAt(head: readonly SopFile[], path: string): SopFile | null {
  return head.find((f) => f.path === path) ?? null;
}

/** The procedure as head compiles now (null when head does not compile or lacks it). */
export function headProcedure(head: readonly SopFile[], procedureId: string): Procedure | null {
  const compiled = compileFiles(new Map(head.map((f) => [f.path, f.text])));
  return compiled.procedures.find((p) => p.procedure_id === procedureId) ?? null;
}

/** A rule pattern as far as finding its rule at head goes. */
export interface RuleOfPattern {
  procedure_id: string;
  lineage_id: string;
  rule_id: string;
  rule_kind: string;
  rule_index: number;
  rule_text: string;
}

/**
 * The rule a pattern is about, as it reads at head (what a suggestion edits): the wording of its
 * lineage that is at head; else, when head rewords it since the live release (not published
 * yet), the head rule the next publish would link it to (the publish's own matching); else,
 * when head no longer has it, the wording its sessions last ran.
 */
export function ruleAtHead(
  head: readonly SopFile[],
  p: RuleOfPattern,
  links: readonly LineageLink[],
  live: readonly LineageRule[] | null,
): { rule_id: string; kind: string; index: number; text: string } {
  const proc = headProcedure(head, p.procedure_id);
  const last = { rule_id: p.rule_id, kind: p.rule_kind, index: p.rule_index, text: p.rule_text };
  if (!proc) return last;
  const lineage = new Lineage(links.filter((l) => l.procedure_id === p.procedure_id));
  const ofPattern = (ruleId: string) => {
    try {
      return lineage.lineageId(p.procedure_id, ruleId) === p.lineage_id;
    } catch (err) {
      if (err instanceof LineageCycleError) return false;
      throw err;
    }
  };
  const atHead = proc.rules.find((r) => ofPattern(r.rule_id));
  if (atHead) return atHead;
  if (live) {
    const next = compareProcedure(p.procedure_id, live, proc.rules).find((c) => c.old_rule_id !== null && c.new_rule_id !== null && ofPattern(c.old_rule_id));
    const rule = next && proc.rules.find((r) => r.rule_id === next.new_rule_id);
    if (rule) return rule;
  }
  return last;
}
