import { z } from 'zod';
import type { RuleStatus } from '../body';
import { DEFAULT_SUBJECT_CHARS } from './prompt';

/**
 * How the checker's models are used, from the environment, validated once at start-up: a bad
 * value stops the process with a message naming the variable.
 *
 *   SOPOPS_DECISIONS     JSON, every key optional (the rest keep their defaults):
 *                        {"route": [no, yes, decide], "responded": [...], "condition": [...],
 *                         "step": [...], "never": [...], "warning": [...],
 *                         "goal": [no, yes], "review_statuses": ["skipped", ...]}
 *   SOPOPS_CHECK_MODE    decide (default): decisions, then the reasoning model reviews what
 *                        they flag or are unsure of; review: the reasoning model judges every rule
 *   SOPOPS_CHECK_REVIEW  off: decisions only, nothing is reviewed
 *   SOPOPS_SUBJECT_CHARS the most characters of a session the models read (default 16000, at
 *                        least 1000); a longer one keeps its first and last turns
 *
 * A band reads the decision's probability of yes (p):
 *   p <= no             a sure no
 *   p >= yes            a sure yes
 *   in between          unsure: answered p >= decide; the reasoning model looks again at an
 *                       unsure step, never or responded decision (the checker reviews rules'
 *                       own decisions; route, condition and warning stand as answered)
 * The goal has no review: in between its two bounds, whether it was reached is unclear (null).
 */
export type BandKind = 'route' | 'responded' | 'condition' | 'step' | 'never' | 'warning';
export const BAND_KINDS: readonly BandKind[] = ['route', 'responded', 'condition', 'step', 'never', 'warning'];

/** [no, yes, decide]. */
export type Band = readonly [number, number, number];

export interface DecisionSettings {
  bands: Record<BandKind, Band>;
  /** [no, yes]: at or under no, not reached; at or over yes, reached; between, unclear. */
  goal: readonly [number, number];
  /** Decided statuses the reasoning model reviews even when the decision was sure. */
  review_statuses: readonly RuleStatus[];
}

export type CheckMode = 'decide' | 'review';

export interface SopModelSettings {
  decisions: DecisionSettings;
  mode: CheckMode;
  /** false: SOPOPS_CHECK_REVIEW=off. */
  review: boolean;
  /** SOPOPS_SUBJECT_CHARS: the most characters of a session the models read (renderSubject). */
  subjectChars: number;
}

/**
 * The defaults. A never rule's flag is costly (it makes the procedure deviated), so its sure
 * yes asks for more; every band's middle goes to review, so a wide middle costs reasoning
 * calls, not wrong statuses.
 */
export const DEFAULT_DECISIONS: DecisionSettings = {
  bands: {
    route: [0.2, 0.8, 0.5],
    responded: [0.2, 0.8, 0.5],
    condition: [0.2, 0.8, 0.5],
    step: [0.2, 0.8, 0.5],
    never: [0.1, 0.9, 0.5],
    warning: [0.2, 0.8, 0.5],
  },
  goal: [0.3, 0.7],
  review_statuses: ['skipped', 'violated', 'unheeded'],
};

export const DEFAULT_SOP_SETTINGS: SopModelSettings = { decisions: DEFAULT_DECISIONS, mode: 'decide', review: true, subjectChars: DEFAULT_SUBJECT_CHARS };

const REVIEWABLE = ['done', 'out_of_order', 'skipped', 'not_reached', 'not_applicable', 'violated', 'ok', 'present', 'unheeded', 'absent'] as const;

const p = z.number().min(0, 'a probability is at least 0').max(1, 'a probability is at most 1');
const band = z
  .tuple([p, p, p])
  .refine(([no, yes]) => no < yes, 'no must be under yes ([no, yes, decide])')
  .refine(([no, yes, decide]) => decide >= no && decide <= yes, 'decide must be between no and yes ([no, yes, decide])');

const decisions = z
  .object({
    route: band,
    responded: band,
    condition: band,
    step: band,
    never: band,
    warning: band,
    goal: z.tuple([p, p]).refine(([no, yes]) => no < yes, 'no must be under yes ([no, yes])'),
    review_statuses: z.array(z.enum(REVIEWABLE)),
  })
  .partial()
  .strict();

const onOff = z
  .string()
  .optional()
  .transform((s, ctx) => {
    if (s === undefined || s === '') return true;
    if (/^(1|true|on|yes)$/i.test(s)) return true;
    if (/^(0|false|off|no)$/i.test(s)) return false;
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected on or off, got "${s}"` });
    return z.NEVER;
  });

export class SopSettingsError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'SopSettingsError';
  }
}

export function loadSopSettings(env: Record<string, string | undefined> = process.env): SopModelSettings {
  const problems: string[] = [];
  let parsedDecisions: z.infer<typeof decisions> = {};
  const raw = env.SOPOPS_DECISIONS;
  if (raw !== undefined && raw.trim() !== '') {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (e) {
      problems.push(`SOPOPS_DECISIONS: is not valid JSON (${(e as Error).message})`);
    }
    if (json !== undefined) {
      const r = decisions.safeParse(json);
      if (r.success) parsedDecisions = r.data;
      else for (const i of r.error.issues) problems.push(`SOPOPS_DECISIONS${i.path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('')}: ${i.message}`);
    }
  }
  const mode = z.enum(['decide', 'review']).default('decide').safeParse(env.SOPOPS_CHECK_MODE || undefined);
  if (!mode.success) problems.push(`SOPOPS_CHECK_MODE: expected decide or review, got "${env.SOPOPS_CHECK_MODE}"`);
  const review = onOff.safeParse(env.SOPOPS_CHECK_REVIEW);
  if (!review.success) problems.push(`SOPOPS_CHECK_REVIEW: ${review.error.issues[0].message}`);
  const rawChars = env.SOPOPS_SUBJECT_CHARS?.trim();
  const subjectChars = rawChars ? Number(rawChars) : DEFAULT_SUBJECT_CHARS;
  if (!Number.isInteger(subjectChars) || subjectChars < 1000) problems.push(`SOPOPS_SUBJECT_CHARS: expected a whole number of characters, at least 1000, got "${env.SOPOPS_SUBJECT_CHARS}"`);
  if (problems.length) throw new SopSettingsError(problems);
  const { goal, review_statuses, ...bands } = parsedDecisions;
  return {
    decisions: {
      bands: { ...DEFAULT_DECISIONS.bands, ...bands },
      goal: goal ?? DEFAULT_DECISIONS.goal,
      review_statuses: review_statuses ?? DEFAULT_DECISIONS.review_statuses,
    },
    mode: mode.success ? mode.data : 'decide',
    review: review.success ? review.data : true,
    subjectChars,
  };
}

/** Where a probability falls in a band: a sure answer, or an unsure one to review. */
export function inBand(prob: number, [no, yes, decide]: Band): { answer: boolean; sure: boolean } {
  if (prob <= no) return { answer: false, sure: true };
  if (prob >= yes) return { answer: true, sure: true };
  return { answer: prob >= decide, sure: false };
}
