import { idOf, procedure, refund, takeOrder } from './fixtures.test';
import { Lineage, linksFromChanges } from './links';
import { compareReleases } from './match';
import { rebuildLineage, type ReleaseRules } from './rebuild';

const releases: ReleaseRules[] = takeOrder.map((r, i) => ({
  procedures: [procedure('take-order', r), procedure('refund', refund[Math.min(i, refund.length - 1)])],
}));
const step = (text: string) => idOf('step', text);

describe('rebuilding the lineage of every release', () => {
  it('gives the rows publishing the releases one by one gave', () => {
    let published = new Lineage();
    releases.forEach((r, i) => {
      published = published.withPublished(linksFromChanges(compareReleases(i === 0 ? [] : releases[i - 1].procedures, r.procedures))).lineage;
    });
    const rebuilt = rebuildLineage(releases);
    expect(rebuilt).toEqual(published.links());
    expect(rebuilt.length).toBeGreaterThan(0);
  });

  it('is idempotent: rebuilding over its own rows changes nothing', () => {
    const once = rebuildLineage(releases);
    expect(rebuildLineage(releases, once)).toEqual(once);
  });

  it('keeps manual rows and recomputes the others', () => {
    const reworded = step('Read the whole order back to the caller.');
    const unlink = { procedure_id: 'take-order', rule_id: reworded, previous_rule_id: null, how: 'manual' as const, similarity: null };
    // A stale matched row is dropped and recomputed; the manual one stays.
    const stale = { procedure_id: 'take-order', rule_id: step("Confirm the caller's delivery address."), previous_rule_id: 'x', how: 'matched' as const, similarity: 0.9 };
    const rows = new Lineage(rebuildLineage(releases, [unlink, stale]));
    expect(rows.link('take-order', reworded)).toEqual(unlink);
    expect(rows.lineageId('take-order', reworded)).toBe(reworded);
    expect(rows.link('take-order', stale.rule_id)).toMatchObject({ how: 'matched', previous_rule_id: step('Confirm the delivery address with the caller.') });
  });

  it('uses the suggestions applied in each release', () => {
    const rewritten = { step: ['Ask two security questions before anything else.', ...refund[0].step!.slice(1)] };
    const withSuggestion: ReleaseRules[] = [
      { procedures: [procedure('refund', refund[0])] },
      { procedures: [procedure('refund', rewritten)], suggestions: [{ procedure_id: 'refund', rule_id: step('Verify the identity of the customer.') }] },
    ];
    const rows = new Lineage(rebuildLineage(withSuggestion));
    expect(rows.link('refund', step('Ask two security questions before anything else.'))).toMatchObject({ how: 'suggestion', previous_rule_id: step('Verify the identity of the customer.') });
  });
});
