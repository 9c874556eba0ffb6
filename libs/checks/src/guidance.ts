import type { RuleType } from './types';

/**
 * Guidance placeholders (CONTRACTS.md section 2). The guidance is the note that reaches the
 * agent, so a value is written the way a person would read it, and a placeholder the engine
 * has no value for (or that is misspelt) stays visible rather than silently disappearing.
 */
export const GUIDANCE_PLACEHOLDERS = ['tool', 'count', 'args', 'name', 'ms', 'metric', 'value', 'pattern', 'requires'] as const;
export type GuidancePlaceholder = (typeof GUIDANCE_PLACEHOLDERS)[number];

export type GuidanceValues = Partial<Record<GuidancePlaceholder, unknown>>;

/**
 * The placeholders each rule type fills (the engine's rules, engine/rules/*.ts: {count} is every
 * finding's, the others what its rule passes); any other stays in the note as written.
 * docs/contracts.md section 2 and docs/checks.md list them; placeholders.spec.ts holds the
 * engine to this table.
 */
export const RULE_PLACEHOLDERS: Record<RuleType, readonly GuidancePlaceholder[]> = {
  repeat: ['count', 'tool', 'name', 'args'],
  errors: ['count', 'tool', 'name', 'args'],
  count: ['count', 'tool', 'name'],
  slow: ['count', 'tool', 'name', 'ms'],
  threshold: ['count', 'metric', 'value'],
  match: ['count', 'tool', 'name', 'pattern'],
  requires_before: ['count', 'tool', 'name', 'requires'],
  unrecovered_error: ['count', 'tool'],
  run_end: ['count', 'name'],
};

/** The placeholders a question's finding fills (libs/questions findings.ts). */
export const QUESTION_PLACEHOLDERS: readonly GuidancePlaceholder[] = ['count', 'tool', 'name'];

/** `{args}` is the call's arguments as compact JSON, cut so a large payload cannot flood the note. */
export const MAX_ARGS_CHARS = 200;

const PLACEHOLDER = /\{([a-z_]+)\}/g;
const KNOWN = new Set<string>(GUIDANCE_PLACEHOLDERS);

export function fillGuidance(template: string, values: GuidanceValues): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => {
    if (!KNOWN.has(name)) return whole;
    const v = values[name as GuidancePlaceholder];
    if (v === undefined) return whole;
    return name === 'args' ? formatArgs(v) : formatValue(v);
  });
}

/** Placeholders fillGuidance knows that a template uses but `fills` (a rule type's) does not: sent as written. */
export function unfilledPlaceholders(template: string, fills: readonly GuidancePlaceholder[]): GuidancePlaceholder[] {
  const out = new Set<GuidancePlaceholder>();
  for (const m of template.matchAll(PLACEHOLDER)) {
    const name = m[1] as GuidancePlaceholder;
    if (KNOWN.has(name) && !fills.includes(name)) out.add(name);
  }
  return [...out];
}

/** Placeholders in a template that fillGuidance does not know (a likely typo). */
export function unknownPlaceholders(template: string): string[] {
  const out = new Set<string>();
  for (const m of template.matchAll(PLACEHOLDER)) if (!KNOWN.has(m[1])) out.add(m[1]);
  return [...out];
}

export function formatArgs(v: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = String(v);
  }
  if (s.length <= MAX_ARGS_CHARS) return s;
  let cut = s.slice(0, MAX_ARGS_CHARS);
  // Do not leave half of a surrogate pair at the cut.
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return `${cut}…`;
}

function formatValue(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v) || Number.isInteger(v)) return String(v);
    // Costs and fractional durations: a few decimals are enough for a note.
    return String(Math.round(v * 10_000) / 10_000);
  }
  if (Array.isArray(v)) return v.map(formatValue).join(', ');
  if (v === null) return 'null';
  if (typeof v === 'object') return formatArgs(v);
  return String(v);
}
