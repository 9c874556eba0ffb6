import { compileFiles, type Issue, type Procedure } from '@neatroots/sop';
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
