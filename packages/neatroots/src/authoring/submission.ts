import { AuthoringError, type Author, type CheckProblem, type CheckSubmission } from '@neatroots/api';
import { CheckError, checkObject, checkProblems, checkYaml, fieldLine, parseCheck, parseCheckFile, setCheckField, type Check } from '@neatroots/checks';

/**
 * A check as submitted to the authoring API or an MCP tool, validated like a check file
 * (schema.ts, the only reader of check YAML) and made the project's own: it applies in the
 * project whose key saved it, and nowhere else. Problems come back all at once, each naming
 * its field and, for YAML, its line.
 */

/** Where messages say a submitted check is (a file's name would mislead: it is not one). */
const WHERE = 'check';

export interface Submitted {
  check: Check;
  /** The YAML stored: as written, with applies_to.project set to the project. */
  yaml: string;
  warnings: string[];
}

/** A person may write a halt rule; a coding agent may not (the seed). */
export function mayHalt(by: Author): boolean {
  return by !== 'agent';
}

export function problemsOf(e: CheckError, yaml?: string): CheckProblem[] {
  return checkProblems(e).map((p) => {
    const line = yaml !== undefined ? fieldLine(yaml, p.field) : undefined;
    return {
      ...(p.checkId ? { check_id: p.checkId } : {}),
      ...(p.field ? { field: p.field } : {}),
      reason: p.reason,
      ...(line !== undefined ? { line } : {}),
      message: line !== undefined ? `line ${line}: ${p.message}` : p.message,
    };
  });
}

export function invalid(e: CheckError, yaml?: string): AuthoringError {
  const problems = problemsOf(e, yaml);
  return new AuthoringError(400, 'invalid_check', problems.map((p) => p.message).join('\n'), problems);
}

export function parseSubmission(project: string, sub: CheckSubmission, by: Author): Submitted {
  const warnings: string[] = [];
  let raw: Record<string, unknown>;
  let text: string;
  if (sub.yaml !== undefined) {
    let parsed: Check[];
    try {
      parsed = parseCheckFile(sub.yaml, WHERE, 'database', { mayHalt: mayHalt(by) }).checks;
    } catch (e) {
      if (e instanceof CheckError) throw invalid(e, sub.yaml);
      throw e;
    }
    if (parsed.length !== 1) throw new AuthoringError(400, 'invalid_check', `the YAML must hold exactly one check, found ${parsed.length}`);
    text = sub.yaml;
    raw = checkObject(text) ?? {};
  } else {
    raw = { ...(sub.check ?? {}) };
    text = checkYaml(raw);
  }
  scopeTo(project, raw);
  let check: Check;
  try {
    check = parseCheck(raw, WHERE, 'database', warnings, undefined, { mayHalt: mayHalt(by) });
  } catch (e) {
    if (e instanceof CheckError) throw invalid(e, sub.yaml !== undefined ? text : undefined);
    throw e;
  }
  if (RESERVED_IDS.has(check.id)) {
    const problem: CheckProblem = {
      check_id: check.id,
      field: 'id',
      reason: `"${check.id}" names a page of the API (checks/${check.id}); choose another id`,
      message: `${WHERE}: id: "${check.id}" names a page of the API (checks/${check.id}); choose another id`,
    };
    throw new AuthoringError(400, 'invalid_check', problem.message, [problem]);
  }
  return { check, yaml: withProject(text, project), warnings };
}

/** Ids a saved check cannot take: GET checks/{id} could never answer it (these paths are other pages). */
const RESERVED_IDS = new Set(['stats', 'disabled', 'draft', 'preview', 'validate']);

/** applies_to.project: absent becomes this project; naming any other is refused. */
function scopeTo(project: string, raw: Record<string, unknown>): void {
  const at = raw.applies_to;
  if (at === undefined || at === null) {
    raw.applies_to = { project: [project] };
    return;
  }
  if (typeof at !== 'object' || Array.isArray(at)) return; // the schema says what is wrong
  const given = (at as Record<string, unknown>).project;
  if (given === undefined) {
    raw.applies_to = { ...at, project: [project] };
    return;
  }
  const list = Array.isArray(given) ? given : [given];
  if (list.some((p) => p !== project)) {
    const problem: CheckProblem = {
      ...(typeof raw.id === 'string' ? { check_id: raw.id } : {}),
      field: 'applies_to.project',
      reason: `a check saved in project ${project} applies there only; leave applies_to.project out or name ${project}`,
      message: `${WHERE}: applies_to.project: a check saved in project ${project} applies there only`,
    };
    throw new AuthoringError(400, 'invalid_check', problem.message, [problem]);
  }
}

/** The YAML with applies_to.project set, comments and layout kept. */
export function withProject(text: string, project: string): string {
  return setCheckField(text, ['applies_to', 'project'], [project]);
}

/** The YAML with action set (switching a rule to halt), comments and layout kept. */
export function withAction(text: string, action: 'flag' | 'halt'): string {
  return setCheckField(text, ['action'], action);
}
