import { strings, UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, LONG_CALL_WAIT_MS, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/**
 * `sopops calibrate --workspace WS [--procedure P] [--dry-run] [--json]`: fits the check
 * thresholds to the workspace's labels (POST /calibrate: the server's sopops_calibrate job)
 * and prints, per procedure, the labels used, the score before and after, and each question
 * whose band changed; a procedure or question that kept its band says why.
 */
type Band = [number, number, number];
interface Refusal {
  code: string;
  message: string;
  have: number;
  need: number;
}
interface Calibrated {
  workspace: string;
  dry_run: boolean;
  procedures: {
    procedure_id: string;
    labels: number;
    negative_labels: number;
    saved: boolean;
    skipped: Refusal | null;
    score_before: number | null;
    score: number | null;
    rules: { kind: string; index: number; text: string; field: string; before: Band; after: Band; skipped: Refusal | null }[];
  }[];
}

const KIND: Record<string, string> = { step: 'step', never: 'never rule', warning: 'warning sign' };
const score = (s: number | null) => (s === null ? '-' : String(s));
const short = (t: string) => (t.length > 60 ? `${t.slice(0, 57)}...` : t);

/** The lines printed for one answer (also what the tests read). */
export function calibrationLines(r: Calibrated): string[] {
  const lines: string[] = [];
  for (const p of r.procedures) {
    const labels = `${p.labels} label${p.labels === 1 ? '' : 's'} (${p.negative_labels} negative)`;
    if (p.skipped) {
      lines.push(`${p.procedure_id}: not calibrated: ${p.skipped.code} (have ${p.skipped.have}, need ${p.skipped.need}): ${p.skipped.message}`);
      continue;
    }
    lines.push(`${p.procedure_id}: ${labels}, score ${score(p.score_before)} -> ${score(p.score)}; ${p.saved ? 'saved' : r.dry_run ? 'not saved (dry run)' : 'not saved'}`);
    for (const q of p.rules) {
      const what = `  ${KIND[q.kind] ?? q.kind} ${q.index} "${short(q.text)}" (${q.field})`;
      if (q.after[0] !== q.before[0] || q.after[1] !== q.before[1]) lines.push(`${what}: [${q.before.join(', ')}] -> [${q.after.join(', ')}]`);
      else if (q.skipped && q.skipped.code !== 'too_few_failures') lines.push(`${what}: kept: ${q.skipped.code} (have ${q.skipped.have}, need ${q.skipped.need}): ${q.skipped.message}`);
    }
    const few = p.rules.filter((q) => q.skipped?.code === 'too_few_failures').length;
    if (few) lines.push(`  ${few} question${few === 1 ? '' : 's'} kept ${few === 1 ? 'its band' : 'their bands'}: fewer than 3 labeled failures on the rule`);
  }
  return lines;
}

export const calibrateCommand: Command = {
  usage: 'sopops calibrate --workspace WS [--procedure P] [--dry-run] [--json] [--url URL] [--key KEY]',
  summary: "fit the checker's review bands to the workspace's verdicts and overrides",
  help: `Fits each procedure's check thresholds to the labels reviewers gave (verdicts on patterns,
overrides of findings; a misjudged finding is a negative label) and stores them for the
workspace: a question's review band may be widened, never narrowed, and is used while the
question reads the same. --procedure fits one procedure; --dry-run answers without storing;
--json prints the server's answer as it is.

${API_HELP}

Exit status: 0 at least one procedure was fitted; 1 every procedure was refused (too few
labeled sessions or failures, not in the live release: said on stdout) or the server refused;
2 for wrong options.`,
  flags: { ...API_FLAGS, procedure: { value: true }, 'dry-run': {}, json: {} },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`calibrate takes no arguments, got ${p.positional.join(' ')}`);
    const target = apiTarget(p, io);
    const procedure = strings(p, 'procedure').at(-1);
    const body = { ...(procedure ? { procedure } : {}), ...(p.flags['dry-run'] === true ? { dry_run: true } : {}) };
    try {
      const r = await workspaceCall<Calibrated>(target, 'POST', '/calibrate', { json: body }, { waitMs: LONG_CALL_WAIT_MS });
      if (p.flags.json === true) io.out(JSON.stringify(r));
      else for (const line of calibrationLines(r)) io.out(line);
      return r.procedures.some((x) => !x.skipped) ? 0 : 1;
    } catch (err) {
      return reportApiError('sopops calibrate', err, io);
    }
  },
};
