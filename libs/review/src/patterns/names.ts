import type { RuleKind } from '@neatroots/sop';

/**
 * What a rule pattern is called before a model names it: the rule's own text, trimmed to a
 * short phrase (the seed: "Without a model it's named with the rule's text, trimmed to a short
 * phrase"). The pattern keeps `named_by: rule_text` so `sopops patterns rename` (or the next
 * recluster) can find these and ask the reasoning model for what the agent did wrong.
 */
export const NAME_MAX_CHARS = 60;

export function nameFromRuleText(text: string, max = NAME_MAX_CHARS): string {
  let s = text.replace(/\s+/g, ' ').trim();
  // A clause after a colon, semicolon or dash is detail ("Confirm the address: street, ...").
  const clause = /\s*(?:[;:]|\s[-–—]\s)/.exec(s);
  if (clause && clause.index >= 12) s = s.slice(0, clause.index);
  s = s.replace(/[\s.!,;:]+$/u, '');
  if (s.length <= max) return s || 'Unnamed rule';
  const cut = s.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space >= max / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:]+$/u, '')}…`;
}

const KIND_LABEL: Record<RuleKind, string> = { step: 'Step', never: 'Never rule', warning: 'Warning sign' };

/** What the UI shows beside a pattern's name: "Step 3", "Never rule 2", "Warning sign 1". */
export function ruleLabel(kind: RuleKind, index: number): string {
  return `${KIND_LABEL[kind]} ${index}`;
}
