import type { RuleType } from './types';

/**
 * Guidance placeholders (CONTRACTS.md section 2). The guidance is the note that reaches the
 * agent, so a value is written the way a person would read it, and a placeholder the engine
 * has no value for (the span lacks it, or the rule's type never fills it) is written as words
 * saying so (UNKNOWN_VALUES), never as the raw `{name}`. A misspelt one is the author's text and
 * stays as written (`checks validate` warns about it).
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

/**
 * What a placeholder reads as when its value is unknown: the call's arguments were not recorded
 * (OpenTelemetry leaves them out unless content capture is on), a span has no tool name, or the
 * rule's type does not fill it. docs/checks.md and docs/contracts.md section 2 list them.
 */
export const UNKNOWN_VALUES: Record<GuidancePlaceholder, string> = {
  tool: 'an unnamed tool',
  count: 'several',
  args: 'arguments not recorded',
  name: 'an unnamed call',
  ms: 'an unknown number of',
  metric: 'unknown metric',
  value: 'an unknown number of',
  pattern: 'an unknown pattern',
  requires: 'the required call',
};

/** `{args}` is the call's arguments as compact JSON, cut so a large payload cannot flood the note. */
export const MAX_ARGS_CHARS = 200;

const PLACEHOLDER = /\{([a-z_]+)\}/g;
const KNOWN = new Set<string>(GUIDANCE_PLACEHOLDERS);

export function fillGuidance(template: string, values: GuidanceValues): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => {
    if (!KNOWN.has(name)) return whole;
    const v = values[name as GuidancePlaceholder];
    if (v === undefined) return UNKNOWN_VALUES[name as GuidancePlaceholder];
    return name === 'args' ? formatArgs(v) : formatValue(v);
  });
}

/** Placeholders fillGuidance knows that a template uses but `fills` (a rule type's) does not: sent as UNKNOWN_VALUES words. */
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
