/**
 * A shop's refund procedure over four releases, edited the way people edit procedures, for
 * the rule lineage tests (service and API). Steps are tool steps, so sessions are checked
 * without a model: a required tool never called, with a later step done, is a `skipped` step.
 *
 *   1  the first version
 *   2  step 1 reworded in place (0.8), step 2 reworded in place below the anywhere bar (0.4)
 *   3  a step added at 1; the look-up moved to 2 unchanged; the payment check rewritten past
 *      recognition (new + removed); the receipt step moved to 5 and reworded (matched anywhere);
 *      the never rule dropped and a warning sign with most of its words added (kinds never cross)
 *   4  the receipt step reverted to its first wording
 */
const HEAD = `# Refund a payment
Goal: The caller's payment is refunded.

`;

export const REFUND_RELEASES: string[] = [
  `${HEAD}## Steps
1. Look up the order of the caller. [tool: lookup_order, required]
2. Check that the payment is within the refund window of 30 days. [tool: check_payment, required]
3. Refund the payment to the card. [tool: refund_payment, required]
4. Email the refund receipt to the caller. [tool: send_receipt, required]

## Never
- Promise a refund before the payment is checked.

## Warning signs
- The caller threatens to dispute the charge. -> Offer a callback from the manager.
`,
  `${HEAD}## Steps
1. Look up the caller's order by order number. [tool: lookup_order, required]
2. Check that the payment is less than 30 days old. [tool: check_payment, required]
3. Refund the payment to the card. [tool: refund_payment, required]
4. Email the refund receipt to the caller. [tool: send_receipt, required]

## Never
- Promise a refund before the payment is checked.

## Warning signs
- The caller threatens to dispute the charge. -> Offer a callback from the manager.
`,
  `${HEAD}## Steps
1. Confirm who the caller is. [tool: verify_caller, required]
2. Look up the caller's order by order number. [tool: lookup_order, required]
3. Make sure the charge happened this month. [tool: check_payment, required]
4. Refund the payment to the card. [tool: refund_payment, required]
5. Email the caller the receipt of the refund. [tool: send_receipt, required]

## Never
- Read the full card number aloud.

## Warning signs
- The caller threatens to dispute the charge. -> Offer a callback from the manager.
- The agent promises a refund before the payment is checked.
`,
  `${HEAD}## Steps
1. Confirm who the caller is. [tool: verify_caller, required]
2. Look up the caller's order by order number. [tool: lookup_order, required]
3. Make sure the charge happened this month. [tool: check_payment, required]
4. Refund the payment to the card. [tool: refund_payment, required]
5. Email the refund receipt to the caller. [tool: send_receipt, required]

## Never
- Read the full card number aloud.

## Warning signs
- The caller threatens to dispute the charge. -> Offer a callback from the manager.
- The agent promises a refund before the payment is checked.
`,
];

export const REFUND_AGENT = 'instructions: |\n  You handle refunds at the shop.\nprocedures: [refund]\n';

export const refundFolder = (release: number) => [
  { path: 'procedures/refund.md', text: REFUND_RELEASES[release - 1] },
  { path: 'agents/refund-bot.yaml', text: REFUND_AGENT },
];

/**
 * The look-up step in three wordings, one release each, the rest of the procedure as in release
 * 1 (rewordedFolder): A -> B -> C, each matched in place to the one before (0.8, then 0.83),
 * for a verdict given on A and the wordings that came after it.
 */
export const LOOKUP_WORDINGS: string[] = [
  'Look up the order of the caller.',
  "Look up the caller's order by order number.",
  "Look up the caller's order number in the order system.",
];

export const rewordedFolder = (release: number) => [
  { path: 'procedures/refund.md', text: REFUND_RELEASES[0].replace(LOOKUP_WORDINGS[0], LOOKUP_WORDINGS[release - 1]) },
  { path: 'agents/refund-bot.yaml', text: REFUND_AGENT },
];

/** A refund call where the agent called every tool but `skip` (so the step of `skip` is skipped). */
export function refundSession(externalId: string, skip: string, startedAt = new Date(Date.now() - 3_600_000).toISOString()) {
  const tools = ['verify_caller', 'lookup_order', 'check_payment', 'refund_payment', 'send_receipt'].filter((t) => t !== skip);
  return {
    external_id: externalId,
    agent: 'refund-bot',
    release_id: null,
    started_at: startedAt,
    transcript_ref: null,
    turns: [
      { role: 'user', text: 'I want my money back for order 42.' },
      { role: 'agent', text: 'Done: the refund is on its way and the receipt is in your inbox.' },
    ],
    tool_calls: tools.map((tool) => ({ turn: 1, tool, input: {}, output: { ok: true }, error: null })),
  };
}
