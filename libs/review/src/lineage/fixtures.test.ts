import type { LineageProcedure, LineageRule } from './match';

/**
 * Test procedures over several releases: a restaurant's phone orders and a shop's refunds,
 * edited the way people edit procedures (rewordings in place, a rule moved and reworded, rules
 * added and dropped, a rewrite too far from the old wording, a revert). A rule's id is its kind
 * and text, as with sopc (the same wording keeps its id).
 */
export interface Release {
  step?: string[];
  never?: string[];
  warning?: string[];
}

export function rules(release: Release): LineageRule[] {
  return (['step', 'never', 'warning'] as const).flatMap((kind) =>
    (release[kind] ?? []).map((text, i) => ({ rule_id: idOf(kind, text), kind, index: i + 1, text })),
  );
}

export const idOf = (kind: string, text: string) => `${kind}:${text}`;

export function procedure(procedure_id: string, release: Release): LineageProcedure {
  return { procedure_id, rules: rules(release) };
}

export const takeOrder: Release[] = [
  {
    step: [
      'Greet the caller with the name of the restaurant.',
      'Look up the account of the caller.',
      'Ask what the caller would like to order.',
      'Confirm the delivery address.',
      'Read the order back to the caller.',
    ],
    never: ['Volunteer a price or a description of a dish.', 'Promise a delivery time.'],
    warning: ['The caller sounds upset.', 'The caller asks for a dish that is not on the menu.'],
  },
  // 2: rewordings in place.
  {
    step: [
      "Greet the caller with the restaurant's name.",
      "Look up the caller's account by phone number.",
      'Ask what the caller would like to order.',
      'Confirm the delivery address with the caller.',
      'Read the order back to the caller.',
    ],
    never: ['Volunteer the price or a description of any dish.', 'Promise a delivery time.'],
    warning: ['The caller sounds upset.', 'The caller asks for a dish that is not on the menu.'],
  },
  // 3: a step added at 2, the address check moved to the end and reworded, read-back reworded.
  {
    step: [
      "Greet the caller with the restaurant's name.",
      'Ask whether the order is for pickup or delivery.',
      "Look up the caller's account by phone number.",
      'Ask what the caller would like to order.',
      'Read the whole order back to the caller.',
      "Confirm the caller's delivery address.",
    ],
    never: ['Volunteer the price or a description of any dish.', 'Promise a delivery time.', 'Take a card number over the phone.'],
    warning: ['The caller sounds upset.', 'The caller asks for a dish that is not on the menu.'],
  },
  // 4: the pickup step rewritten past recognition, read-back reverted, a warning sign rewritten,
  // and the off-menu warning sign turned into a step (same words, another kind).
  {
    step: [
      "Greet the caller with the restaurant's name.",
      'Find out if the food will be collected or brought to them.',
      "Look up the caller's account by phone number.",
      'Ask what the caller would like to order.',
      'Tell the caller when a dish is not on the menu.',
      'Read the order back to the caller.',
      "Confirm the caller's delivery address.",
    ],
    never: ['Volunteer the price or a description of any dish.', 'Promise a delivery time.', 'Take a card number over the phone.'],
    warning: ['The caller is angry or raises their voice.'],
  },
];

export const refund: Release[] = [
  {
    step: [
      'Verify the identity of the customer.',
      'Find the payment in the order history.',
      'Check that the payment is within the refund window of 30 days.',
      'Issue the refund to the original payment method.',
      'Tell the customer when the money will arrive.',
    ],
    never: ['Refund more than the amount paid.', 'Ask for the full card number.'],
    warning: ['The customer mentions a chargeback.'],
  },
  // 2: rewordings in place, one of them keeping only 0.4 of its words.
  {
    step: [
      "Verify the customer's identity with two security questions.",
      'Find the payment in the order history.',
      'Check that the payment is less than 30 days old.',
      'Issue the refund to the original payment method.',
      'Tell the customer when the money will arrive.',
    ],
    never: ['Refund more than the customer paid.', 'Ask for the full card number.'],
    warning: ['The customer mentions a chargeback.'],
  },
  // 3: "tell the customer" moved up and reworded; a warning sign added.
  {
    step: [
      "Verify the customer's identity with two security questions.",
      'Tell the customer when the money will be back on their card.',
      'Find the payment in the order history.',
      'Check that the payment is less than 30 days old.',
      'Issue the refund to the original payment method.',
    ],
    never: ['Refund more than the customer paid.', 'Ask for the full card number.'],
    warning: ['The customer mentions a chargeback.', 'The customer threatens to post a bad review.'],
  },
];

/** The rewordings above, old then new: each should stay in one lineage. */
export const rewordings: Array<[kind: string, old: string, new: string]> = [
  ['step', 'Greet the caller with the name of the restaurant.', "Greet the caller with the restaurant's name."],
  ['step', 'Look up the account of the caller.', "Look up the caller's account by phone number."],
  ['step', 'Confirm the delivery address.', 'Confirm the delivery address with the caller.'],
  ['step', 'Confirm the delivery address with the caller.', "Confirm the caller's delivery address."],
  ['step', 'Read the order back to the caller.', 'Read the whole order back to the caller.'],
  ['never', 'Volunteer a price or a description of a dish.', 'Volunteer the price or a description of any dish.'],
  ['step', 'Verify the identity of the customer.', "Verify the customer's identity with two security questions."],
  ['step', 'Check that the payment is within the refund window of 30 days.', 'Check that the payment is less than 30 days old.'],
  ['never', 'Refund more than the amount paid.', 'Refund more than the customer paid.'],
  ['step', 'Tell the customer when the money will arrive.', 'Tell the customer when the money will be back on their card.'],
];
