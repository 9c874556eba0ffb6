/**
 * SuggestEdit: the reasoning model turns a reviewer's verdict on a pattern into an edit of the
 * pattern's procedure file. suggest-1 writes against the file at head; suggest-2 (a rewrite)
 * also gets the edits made to the file since the old suggestion was written, to keep and build
 * on. The answer is a list of find/replace edits of whole lines rather than the whole file:
 * short enough for its answer budget (SUGGEST_ANSWER_TOKENS), and an edit whose `find` is not in the
 * file is caught before anything is compiled (it goes back to the model like sopc's issues).
 */
export const SUGGEST_VERSION = 'suggest-1';
export const REWRITE_VERSION = 'suggest-2';

/**
 * The tokens an edit's answer is given (DecisionItem.max_tokens): a rationale and edits that
 * quote whole lines of the file and their replacement, several lines for a reworded section.
 * The question service's default (250 an answer, 450 a request) cut such answers.
 */
export const SUGGEST_ANSWER_TOKENS = 2_000;

export const SUGGEST_INSTRUCTIONS = `You edit standard operating procedures that AI agents follow. A procedure is a Markdown file compiled by sopc:
"# Title", optional "Goal: ..." and "Applies when: ..." lines, then sections "## Steps" (a numbered list, one step per line; a step may end with annotations in brackets such as [tool: name, required]), "## Never" (a bulleted list) and "## Warning signs" (a bulleted list, "situation -> what to do").
A reviewer looked at a pattern of findings on one rule and gave a verdict. Make the smallest edit to the file that answers it:
- real: the agent made a real mistake; change the instructions so agents stop making it (clearer wording, a missing step or a warning sign).
- acceptable: what the agent did is fine in this situation; add that exception to the rule.
- sop_wrong: the instruction is wrong or outdated; edit the rule.
Keep every other line as it is, and keep the file's format so that it still compiles.
For each question return an object with "id" (the question's id), "rationale" (one or two sentences for the reviewer: what you changed and why) and "edits": a list of {"find": "<one or more whole lines, exactly as they are in the file now>", "replace": "<the lines that replace them>"}. To add a line, find the line it follows and replace it with that line and the new one.
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export type SuggestVerdict = 'real' | 'acceptable' | 'sop_wrong';

export interface SuggestFinding {
  session: string;
  status: string;
  excerpt: string;
  reason: string | null;
}

export interface SuggestSubject {
  path: string;
  procedure_name: string;
  /** The file at head (suggest-1), or as it is now (suggest-2). */
  file: string;
  /** "Never rule 1". */
  rule_label: string;
  rule_text: string;
  pattern_name: string;
  sessions: number;
  verdict: SuggestVerdict;
  note: string | null;
  /** Up to 5. */
  findings: SuggestFinding[];
  /** suggest-2: a unified diff of the file since the old suggestion was written. */
  changes_since?: string | null;
}

export const MAX_FINDINGS = 5;

export function suggestSubject(s: SuggestSubject): string {
  const parts = [
    `Procedure file ${s.path} ("${s.procedure_name}"), as it is now:`,
    '<<<FILE',
    s.file.replace(/\n$/, ''),
    'FILE>>>',
    `The rule: ${s.rule_label}: "${oneLine(s.rule_text)}"`,
    `The pattern: "${oneLine(s.pattern_name)}", in ${s.sessions} session${s.sessions === 1 ? '' : 's'}.`,
    `The verdict: ${s.verdict}${s.note ? `, with the reviewer's note: "${oneLine(s.note)}"` : ''}.`,
  ];
  if (s.findings.length) {
    parts.push('Findings:');
    for (const f of s.findings.slice(0, MAX_FINDINGS)) {
      parts.push(`- session ${f.session}: ${f.status}${f.excerpt ? `; "${oneLine(f.excerpt)}"` : ''}${f.reason ? `; checker's reason: ${oneLine(f.reason)}` : ''}`);
    }
  }
  if (s.changes_since) {
    parts.push('The file was edited since an earlier suggestion was written; keep these edits and build on them:', '<<<DIFF', s.changes_since.replace(/\n$/, ''), 'DIFF>>>');
  }
  return parts.join('\n');
}

/** The question; `tag` keeps a regeneration from reading an earlier answer from the cache. */
export function suggestAsk(verdict: SuggestVerdict, tag: string): string {
  const what =
    verdict === 'real' ? 'Change the instructions to prevent this mistake.' : verdict === 'acceptable' ? 'Add the exception to the rule.' : 'Edit the rule so it is right.';
  return `${what} (suggestion ${tag})`;
}

/** The question asked again with what was wrong with the first answer (sent back once). */
export function retryAsk(verdict: SuggestVerdict, tag: string, problems: readonly string[]): string {
  return `${suggestAsk(verdict, tag)} Your previous edit could not be used: ${problems.map(oneLine).join('; ')}. Answer again with edits that fix this.`;
}

export interface SuggestEdit {
  find: string;
  replace: string;
}

export interface SuggestAnswer {
  rationale: string;
  /** Edits of the file; or, from a model that wrote the whole file, new_text. */
  edits: SuggestEdit[] | null;
  new_text: string | null;
}

export class MalformedSuggestion extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedSuggestion';
  }
}

/** Reads the model's answer leniently (edits, or a whole new_text), else MalformedSuggestion. */
export function readSuggestion(answer: unknown): SuggestAnswer {
  if (!answer || typeof answer !== 'object' || Array.isArray(answer)) throw new MalformedSuggestion('the answer is not an object with "rationale" and "edits"');
  const a = answer as Record<string, unknown>;
  const rationale = typeof a.rationale === 'string' ? a.rationale.trim() : '';
  if (typeof a.new_text === 'string' && a.edits === undefined) return { rationale, edits: null, new_text: a.new_text };
  if (!Array.isArray(a.edits) || a.edits.length === 0) throw new MalformedSuggestion('the answer has no "edits" list');
  const edits = a.edits.map((e, i) => {
    if (!e || typeof e !== 'object') throw new MalformedSuggestion(`edit ${i + 1} is not an object with "find" and "replace"`);
    const { find, replace } = e as Record<string, unknown>;
    if (typeof find !== 'string' || !find.trim()) throw new MalformedSuggestion(`edit ${i + 1} has no "find" text`);
    if (typeof replace !== 'string') throw new MalformedSuggestion(`edit ${i + 1} has no "replace" text`);
    return { find, replace };
  });
  return { rationale, edits, new_text: null };
}

/**
 * The file with the edits made, each `find` matched as whole lines (trailing spaces ignored),
 * once; an edit that matches nowhere or more than once is a problem sent back to the model.
 */
export function applyEdits(file: string, edits: readonly SuggestEdit[]): { ok: true; text: string } | { ok: false; problems: string[] } {
  const endsWithNewline = file.endsWith('\n');
  let lines = (endsWithNewline ? file.slice(0, -1) : file).split('\n');
  const problems: string[] = [];
  edits.forEach((e, i) => {
    const find = toLines(e.find);
    const at: number[] = [];
    for (let j = 0; j + find.length <= lines.length; j++) {
      if (find.every((l, k) => l.trimEnd() === lines[j + k].trimEnd())) at.push(j);
    }
    if (at.length !== 1) {
      problems.push(`edit ${i + 1}: the lines to find (${JSON.stringify(clip(e.find))}) are ${at.length ? `in the file ${at.length} times` : 'not in the file'}`);
      return;
    }
    const replace = e.replace === '' ? [] : toLines(e.replace);
    lines = [...lines.slice(0, at[0]), ...replace, ...lines.slice(at[0] + find.length)];
  });
  if (problems.length) return { ok: false, problems };
  return { ok: true, text: lines.join('\n') + (endsWithNewline ? '\n' : '') };
}

function toLines(s: string): string[] {
  return s.replace(/\r\n/g, '\n').replace(/\n$/, '').split('\n');
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

function clip(s: string): string {
  const l = oneLine(s);
  return l.length > 80 ? `${l.slice(0, 77)}...` : l;
}
