import { deadLetterSources } from './module';

/**
 * The sources neatroots_dead_letters_total starts at 0 (the review service at its start): what a
 * dead letter of each names, in either deployment. The embedded app's own groups are checked
 * against what it subscribes in packages/neatroots/src/metrics.integration.spec.ts.
 */
describe('deadLetterSources', () => {
  it('names the stores and each consumer group that sets records aside, its group scoped by the prefix in the distributed deployment', () => {
    expect(deadLetterSources('acme', true)).toEqual([
      'store.events',
      'store.findings',
      'store.deliveries',
      'bus:acme.events/acme.review-store',
      'bus:acme.findings/acme.review-findings',
      'bus:acme.deliveries/acme.review-deliveries',
      'bus:acme.events/acme.rule-engine',
      'bus:acme.questions/acme.question',
    ]);
    expect(deadLetterSources('neatroots', false).filter((s) => s.startsWith('bus:'))).toEqual([
      'bus:neatroots.events/review-store',
      'bus:neatroots.findings/review-findings',
      'bus:neatroots.deliveries/review-deliveries',
      'bus:neatroots.events/rule-engine',
      'bus:neatroots.questions/question',
    ]);
  });
});
