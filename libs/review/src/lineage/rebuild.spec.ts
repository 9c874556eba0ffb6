import { idOf, procedure, refund, takeOrder } from './fixtures.test';
import { Lineage, linksFromChanges } from './links';
import { compareReleases } from './match';
import { rebuildLineage, rebuildLineageSteps, type LineageReturn, type ReleaseRules } from './rebuild';

const releases: ReleaseRules[] = takeOrder.map((r, i) => ({
  procedures: [procedure('take-order', r), procedure('refund', refund[Math.min(i, refund.length - 1)])],
}));
const step = (text: string) => idOf('step', text);

describe('rebuilding the lineage of every release', () => {
  it('gives the rows and the returns publishing the releases one by one gave', () => {
    let published = new Lineage();
    const returns: LineageReturn[] = [];
    releases.forEach((r, i) => {
      const p = published.withPublished(linksFromChanges(compareReleases(i === 0 ? [] : releases[i - 1].procedures, r.procedures)));
      published = p.lineage;
      returns.push(...p.returned.map((link) => ({ release: i, link })));
    });
    const rebuilt = rebuildLineageSteps(releases);
    expect(rebuilt.links).toEqual(published.links());
    expect(rebuildLineage(releases)).toEqual(rebuilt.links);
    expect(rebuilt.links.length).toBeGreaterThan(0);
    // take-order's release 4 reverts the read-back step.
    expect(rebuilt.returns).toEqual(returns);
    expect(returns.map((r) => [r.release, r.link.rule_id])).toEqual([[3, step('Read the order back to the caller.')]]);
  });

  it('A, B, A, B: each return is a step at the release that brought it back', () => {
    const [a, b] = ['Look up the order.', 'Look up the order and confirm the owner.'];
    const { links, returns } = rebuildLineageSteps([a, b, a, b].map((text) => ({ procedures: [procedure('pay', { step: [text, 'Charge it.'] })] })));
    expect(new Lineage(links).chain('pay', step(b)).map((l) => [l.rule_id, l.previous_rule_id])).toEqual([[step(a), null], [step(b), step(a)]]);
    expect(returns.map((r) => [r.release, r.link.rule_id, r.link.previous_rule_id, r.link.how])).toEqual([
      [2, step(a), step(b), 'matched'],
      [3, step(b), step(a), 'matched'],
    ]);
  });

  it('a manual row of a rule is not a return when the rule first comes in', () => {
    const [a, b] = ['Look up the order.', 'Look up the order and confirm the owner.'];
    const manual = { procedure_id: 'pay', rule_id: step(b), previous_rule_id: null, how: 'manual' as const, similarity: null };
    const { links, returns } = rebuildLineageSteps([a, b].map((text) => ({ procedures: [procedure('pay', { step: [text] })] })), [manual]);
    expect(new Lineage(links).link('pay', step(b))).toEqual(manual);
    expect(returns).toEqual([]);
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
