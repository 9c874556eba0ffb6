import type { RuleKind } from '@neatroots/sop';

/**
 * What a rule pattern is called before a model names it: the rule's own text, trimmed to a
 * short phrase (the seed: "Without a model it's named with the rule's text, trimmed to a short
 * phrase"). The pattern keeps `named_by: rule_text` so `sopops patterns rename` (or the next
 * recluster) can find these and ask the reasoning model for what the agent did wrong.
 */
export const NAME_MAX_CHARS = 60;

/**
 * `s` without the characters of `chars` at its end. A loop, not a regex: `/[.!,;:\s]+$/` tries
 * every start of a run of them and takes time in the square of a long run not at the end
 * ("........x"), and rule text is whatever an author wrote.
 */
function trimEndOf(s: string, chars: string): string {
  let to = s.length;
  while (to > 0 && chars.includes(s[to - 1])) to--;
  return s.slice(0, to);
}

export function nameFromRuleText(text: string, max = NAME_MAX_CHARS): string {
  let s = text.replace(/\s+/g, ' ').trim();
  // A clause after a colon, semicolon or dash is detail ("Confirm the address: street, ...").
  const clause = /\s*(?:[;:]|\s[-–—]\s)/.exec(s);
  if (clause && clause.index >= 12) s = s.slice(0, clause.index);
  // Whitespace is single spaces by now.
  s = trimEndOf(s, ' .!,;:');
  if (s.length <= max) return s || 'Unnamed rule';
  const cut = s.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${trimEndOf(space >= max / 2 ? cut.slice(0, space) : cut, ' ,;:')}…`;
}

const KIND_LABEL: Record<RuleKind, string> = { step: 'Step', never: 'Never rule', warning: 'Warning sign' };

/** What the UI shows beside a pattern's name: "Step 3", "Never rule 2", "Warning sign 1". */
export function ruleLabel(kind: RuleKind, index: number): string {
  return `${KIND_LABEL[kind]} ${index}`;
}
