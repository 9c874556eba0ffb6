import { sha1Hex, type QuestionCheck } from '@neatroots/checks';
import type { Answer, AnsweredBy } from './types';

/**
 * From a model's raw answer to a verdict: the seed's thresholds (flag_at, flag_on,
 * flag_at_level on the expected level), the 90% cap on an LLM's probability, and the label
 * the run page shows.
 */

/** What a question is, without where it came from: enough to ask it and to judge the answer. */
export type QuestionDef = Pick<QuestionCheck, 'id' | 'kind' | 'ask' | 'options' | 'flag_on' | 'levels' | 'flag_at' | 'flag_at_level'> &
  Partial<Pick<QuestionCheck, 'source' | 'scope' | 'evidence' | 'title' | 'guidance'>> & {
    /** A question whose {rules}, {tools} or {task} were filled for a run: its ask as written (fillParams). */
    ask_as_written?: string;
  };

/** An LLM's confidence in its own answer is not calibrated (the seed), so it counts at most this much. */
export const LLM_PROBABILITY_CAP = 0.9;
export const LLM_CONFIDENCE = 'Very likely (LLM judgment)';
export const LLM_UNLIKELY = 'Unlikely (LLM judgment)';
/** yes_no without flag_at. */
export const DEFAULT_FLAG_AT = 0.7;
/** choice without flag_at: flags when the flag_on labels are more likely than not. */
export const DEFAULT_CHOICE_FLAG_AT = 0.5;

/** One question's part of a model's reply, as parsed from its JSON. */
export interface RawAnswer {
  p?: number;
  probs?: Record<string, number>;
  label?: string;
  level?: number;
  quote?: string;
  /**
   * Why the answer's "p" cannot be read as a probability, with the value given (a number
   * outside 0 to 1, or not a number): a yes/no question answered so is malformed.
   */
  p_problem?: string;
}

/**
 * The key agreement and the classifier are kept under: the check's id and a hash of the question
 * as written, so a reworded question starts afresh. A question filled for a run (its {task},
 * {tools} or {rules}) is keyed as written, not as filled: keyed by the filled wording, every run
 * with a task of its own made a model (256 KB) and an agreement record of its own, never freed,
 * and none of them ever learnt enough to answer.
 */
const keys = new WeakMap<QuestionDef, string>();

export function questionKey(q: QuestionDef): string {
  // Asked on every answer of the fast path: computed once per question object.
  const known = keys.get(q);
  if (known) return known;
  const h = sha1Hex(JSON.stringify([q.kind, q.ask_as_written ?? q.ask, q.options ?? null, q.flag_on ?? null, q.levels ?? null])).slice(0, 10);
  const key = `${q.id}@${h}`;
  keys.set(q, key);
  return key;
}

function clamp01(x: number): number {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

function num(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return undefined;
}

/** Reads one answer object leniently: models name fields a little differently. */
export function readRawAnswer(o: unknown): RawAnswer | undefined {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return undefined;
  const r = o as Record<string, unknown>;
  const out: RawAnswer = {};
  const given = r.p ?? r.probability ?? r.prob;
  const p = num(given);
  if (given !== undefined && given !== null) {
    // Never guessed: 150 or -3 (or 85, once read as a percentage) is not a probability, and
    // clamped it became a verdict (150 flagged at 0.9; -3 passed, taking back a not-checked).
    const shown = JSON.stringify(given)?.slice(0, 40) ?? String(given);
    if (p === undefined) out.p_problem = `"p" is not a number: ${shown}`;
    else if (p < 0 || p > 1) out.p_problem = `"p" is not a probability from 0 to 1: ${shown}`;
    else out.p = p;
  } else if (typeof r.answer === 'string' && /^(yes|no)$/i.test(r.answer)) out.p = /^yes$/i.test(r.answer) ? 1 : 0;
  if (r.probs && typeof r.probs === 'object') {
    const probs: Record<string, number> = {};
    if (Array.isArray(r.probs)) r.probs.forEach((v, i) => { const n = num(v); if (n !== undefined) probs[String(i)] = n; });
    else for (const [k, v] of Object.entries(r.probs as Record<string, unknown>)) { const n = num(v); if (n !== undefined) probs[k] = n; }
    if (Object.keys(probs).length) out.probs = probs;
  }
  if (typeof r.label === 'string') out.label = r.label;
  const level = num(r.level);
  if (level !== undefined) out.level = level;
  if (typeof r.quote === 'string' && r.quote.trim()) out.quote = r.quote.trim();
  return out;
}

export class MalformedAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswerError';
  }
}

function normalize(probs: Record<string, number>, keys: readonly string[]): Record<string, number> | undefined {
  let sum = 0;
  const out: Record<string, number> = {};
  for (const k of keys) {
    const v = Math.max(0, probs[k] ?? 0);
    out[k] = v;
    sum += v;
  }
  if (!(sum > 0)) return undefined;
  for (const k of keys) out[k] /= sum;
  return out;
}

/** The probability of each label (choice) or level (score, keys "0".."n-1"). */
function distribution(q: QuestionDef, raw: RawAnswer, keys: readonly string[], asLevel: boolean): Record<string, number> {
  if (raw.probs) {
    // Models sometimes key levels by their description, or choices by their position.
    const fixed: Record<string, number> = {};
    for (const [k, v] of Object.entries(raw.probs)) {
      if (keys.includes(k)) fixed[k] = (fixed[k] ?? 0) + v;
      else if (asLevel && q.levels) {
        const i = q.levels.indexOf(k);
        if (i >= 0) fixed[String(i)] = (fixed[String(i)] ?? 0) + v;
      } else {
        const lower = keys.find((x) => x.toLowerCase() === k.toLowerCase());
        if (lower) fixed[lower] = (fixed[lower] ?? 0) + v;
      }
    }
    const d = normalize(fixed, keys);
    if (d) return d;
  }
  const one = asLevel ? (raw.level !== undefined ? String(Math.round(raw.level)) : undefined) : raw.label;
  if (one !== undefined && keys.includes(one)) return Object.fromEntries(keys.map((k) => [k, k === one ? 1 : 0]));
  throw new MalformedAnswerError(`no usable ${asLevel ? 'level probabilities' : 'option probabilities'} in the answer`);
}

export interface Verdict {
  flagged: boolean;
  probability?: number;
  value?: number;
  label?: string;
  probs?: Record<string, number>;
}

/**
 * The verdict for a raw answer. For an LLM the probability is capped at 0.9 first, and a line
 * above 0.9 is read as 0.9: an LLM answer can never be surer than the cap, and a check must
 * still be able to fire on one.
 */
export function judge(q: QuestionDef, raw: RawAnswer, llm: boolean): Verdict {
  const cap = (p: number) => (llm ? Math.min(p, LLM_PROBABILITY_CAP) : p);
  const line = (l: number) => (llm ? Math.min(l, LLM_PROBABILITY_CAP) : l);
  switch (q.kind) {
    case 'yes_no': {
      if (raw.p === undefined) throw new MalformedAnswerError(raw.p_problem ?? 'no probability "p" in the answer');
      const p = cap(clamp01(raw.p));
      return { flagged: p >= line(q.flag_at ?? DEFAULT_FLAG_AT), probability: round(p) };
    }
    case 'choice': {
      const labels = Object.keys(q.options ?? {});
      const probs = distribution(q, raw, labels, false);
      const flagOn = q.flag_on ?? [];
      const p = cap(flagOn.reduce((s, l) => s + (probs[l] ?? 0), 0));
      let label = labels[0];
      for (const l of labels) if (probs[l] > probs[label]) label = l;
      return { flagged: p >= line(q.flag_at ?? DEFAULT_CHOICE_FLAG_AT), probability: round(p), label, probs: roundAll(probs) };
    }
    case 'score': {
      const n = q.levels?.length ?? 0;
      const keys = Array.from({ length: n }, (_, i) => String(i));
      const probs = distribution(q, raw, keys, true);
      // Seed: "the score is the expected level, not necessarily a whole number".
      const value = keys.reduce((s, k, i) => s + i * probs[k], 0);
      return { flagged: value >= (q.flag_at_level ?? n - 1), value: round(value), probs: roundAll(probs) };
    }
  }
}

function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

function roundAll(o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round(v)]));
}

/** How the run page shows an answer: the seed's words for an LLM, a percentage for the classifier. */
export function confidenceLabel(v: Verdict, by: AnsweredBy): string {
  if (by !== 'classifier') return v.flagged ? LLM_CONFIDENCE : LLM_UNLIKELY;
  if (v.probability !== undefined) return `${Math.round(v.probability * 100)}%`;
  return `level ${v.value ?? 0}`;
}

export function toAnswer(v: Verdict, by: AnsweredBy, quote?: string): Answer {
  const a: Answer = { status: 'answered', flagged: v.flagged, answered_by: by, confidence: confidenceLabel(v, by) };
  if (v.probability !== undefined) a.probability = v.probability;
  if (v.value !== undefined) a.value = v.value;
  if (v.label !== undefined) a.label = v.label;
  if (v.probs) a.probs = v.probs;
  if (quote) a.quote = quote;
  return a;
}

export function notChecked(reason: string, by?: AnsweredBy): Answer {
  const a: Answer = { status: 'not_checked', flagged: false, reason, confidence: 'Not checked' };
  if (by) a.answered_by = by;
  return a;
}

/**
 * The answer as a target for the classifier: the probability of each class (yes_no: one
 * number; choice: per label; score: per level). Uses the uncapped reading: the cap is about
 * how much to trust a finding, not what the LLM said.
 */
export function targetOf(q: QuestionDef, raw: RawAnswer): number[] | undefined {
  try {
    if (q.kind === 'yes_no') return raw.p === undefined ? undefined : [clamp01(raw.p)];
    const keys = q.kind === 'choice' ? Object.keys(q.options ?? {}) : Array.from({ length: q.levels?.length ?? 0 }, (_, i) => String(i));
    const probs = distribution(q, raw, keys, q.kind === 'score');
    return keys.map((k) => probs[k]);
  } catch {
    return undefined;
  }
}

/** The verdict for a class distribution (the classifier's output), as `judge` reads a model's. */
export function rawFromClasses(q: QuestionDef, classes: readonly number[]): RawAnswer {
  if (q.kind === 'yes_no') return { p: classes[0] };
  const keys = q.kind === 'choice' ? Object.keys(q.options ?? {}) : classes.map((_, i) => String(i));
  return { probs: Object.fromEntries(keys.map((k, i) => [k, classes[i] ?? 0])) };
}
