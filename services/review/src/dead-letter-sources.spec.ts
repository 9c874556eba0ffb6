import { deadLetterMetricSource, deadLetterSources } from './module';

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
      'bus:acme.notes/acme.ingest-notes',
    ]);
    expect(deadLetterSources('neatroots', false).filter((s) => s.startsWith('bus:'))).toEqual([
      'bus:neatroots.events/review-store',
      'bus:neatroots.findings/review-findings',
      'bus:neatroots.deliveries/review-deliveries',
      'bus:neatroots.events/rule-engine',
      'bus:neatroots.questions/question',
      'bus:neatroots.notes/ingest-notes',
    ]);
  });

  it("counts every ingest replica's notes group under one source, the one there at 0 from the start", () => {
    // the groups of two replicas, and of one started again (host-pid-random: a new name each start)
    for (const [source, scoped, prefix] of [
      ['bus:acme.notes/acme.ingest-notes-web-1-41-0a1b2c3d', true, 'acme'],
      ['bus:acme.notes/acme.ingest-notes-web-2-7-99ffee00', true, 'acme'],
      ['bus:neatroots.notes/ingest-notes-laptop-5120-12345678', false, 'neatroots'],
    ] as const) {
      expect(deadLetterSources(prefix, scoped)).toContain(deadLetterMetricSource(source));
    }
    // any other source is counted as it is
    expect(deadLetterMetricSource('bus:acme.events/acme.rule-engine')).toBe('bus:acme.events/acme.rule-engine');
    expect(deadLetterMetricSource('store.events')).toBe('store.events');
  });
});
