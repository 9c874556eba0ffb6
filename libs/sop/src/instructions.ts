import type { Procedure, Rule } from './types';

/**
 * The compiled instructions an agent runs with: its own instructions, then each of its
 * procedures written out in plain words, in the agent's order. The form is meant to be read
 * by a model and by a person checking what the model was told:
 *
 *   <the agent's instructions>
 *
 *   # Procedures
 *
 *   Follow each procedure below when it applies.
 *
 *   ## Take an order
 *   Goal: The order is placed and read back to the caller.
 *   Applies when: The caller wants to order food.
 *
 *   Steps, in this order:
 *   1. Greet the caller with the name of the restaurant.
 *   2. Look up the account of the caller. (Required. Use the tool lookup_account.)
 *   3. Confirm the delivery address. (Only when the caller wants delivery.)
 *
 *   Never:
 *   - Volunteer a price or a description of a dish.
 *
 *   Warning signs:
 *   - The caller sounds upset. Then: Offer a callback from the manager.
 *
 * A procedure without `Applies when:` says "Applies: always." so that the model does not
 * have to guess.
 */
export function compileInstructions(own: string, procedures: readonly Procedure[]): string {
  const parts: string[] = [];
  if (own.trim()) parts.push(own.trim());
  if (procedures.length) {
    parts.push('# Procedures', 'Follow each procedure below when it applies.');
    for (const p of procedures) parts.push(procedureText(p));
  }
  return parts.join('\n\n') + (parts.length ? '\n' : '');
}

function procedureText(p: Procedure): string {
  const head = [`## ${p.name}`];
  if (p.goal) head.push(`Goal: ${p.goal}`);
  head.push(p.applies_when ? `Applies when: ${p.applies_when}` : 'Applies: always.');
  const blocks = [head.join('\n')];
  const of = (kind: Rule['kind']) => p.rules.filter((r) => r.kind === kind);
  const steps = of('step');
  if (steps.length) blocks.push(['Steps, in this order:', ...steps.map((r) => `${r.index}. ${r.text}${stepNote(r)}`)].join('\n'));
  const nevers = of('never');
  if (nevers.length) blocks.push(['Never:', ...nevers.map((r) => `- ${r.text}`)].join('\n'));
  const signs = of('warning');
  if (signs.length) blocks.push(['Warning signs:', ...signs.map((r) => `- ${r.text}${r.action ? ` Then: ${r.action}` : ''}`)].join('\n'));
  return blocks.join('\n\n');
}

function stepNote(r: Rule): string {
  const notes: string[] = [];
  if (r.required) notes.push('Required.');
  if (r.tool) notes.push(`Use the tool ${r.tool}.`);
  if (r.when) notes.push(`Only when ${r.when}.`);
  return notes.length ? ` (${notes.join(' ')})` : '';
}
