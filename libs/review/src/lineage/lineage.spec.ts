import * as path from 'node:path';
import { compileFolder } from '@neatroots/sop';
import { idOf, procedure, refund, rewordings, rules, takeOrder, type Release } from './fixtures.test';
import { Lineage, LineageCycleError, linksFromChanges, type LineageLink } from './links';
import { compareProcedure, compareReleases, type EditedRule, type RuleChange } from './match';
import { similarity, words } from './similarity';

/** The changes between two releases of one fixture procedure, as [how, old text, new text]. */
function changes(id: string, from: Release, to: Release, edited: (string | EditedRule)[] = []): Array<[string, string | null, string | null]> {
  return compareProcedure(id, rules(from), rules(to), edited).map((c) => [c.how, c.old_text, c.new_text]);
}
const changed = (id: string, from: Release, to: Release, edited: (string | EditedRule)[] = []) => changes(id, from, to, edited).filter(([how]) => how !== 'same');

describe('similarity', () => {
  it('is token Jaccard over lowercase words without function words', () => {
    expect([...words('Read THE order back to the caller.')]).toEqual(['read', 'order', 'back', 'caller']);
    // {confirm, delivery, address} against {confirm, delivery, address, caller}
    expect(similarity('Confirm the delivery address.', 'Confirm the delivery address with the caller.')).toBe(0.75);
    expect(similarity('Promise a delivery time.', 'promise THE delivery time')).toBe(1);
  });
  it("drops a possessive 's, so the caller's account is the account of the caller", () => {
    expect(similarity("Look up the caller's account.", 'Look up the account of the caller.')).toBe(1);
  });
  it('keeps negations and other words that change what a rule asks', () => {
    expect(similarity('Tell the caller the price.', 'Do not tell the caller the price.')).toBeLessThan(1);
  });
  it("two different rules of one procedure score at most 0.29 on sop's test fixture (Luigi's) too", () => {
    const fixture = compileFolder(path.join(__dirname, '../../../sop/fixtures/luigis'));
    expect(fixture.errors).toEqual([]);
    expect(fixture.procedures.length).toBeGreaterThan(0);
    for (const p of fixture.procedures) {
      for (const a of p.rules) for (const b of p.rules) if (a !== b) expect(similarity(a.text, b.text)).toBeLessThanOrEqual(0.29);
    }
  });
  it('is 0 for wordings without words that count', () => {
    expect(similarity('', 'The.')).toBe(0);
  });

  it("on the test procedures, rewordings score 0.38 to 1 and two different rules of one procedure at most 0.29 (the seed's figures)", () => {
    for (const [, before, after] of rewordings) {
      expect(similarity(before, after)).toBeGreaterThanOrEqual(0.38);
      expect(similarity(before, after)).toBeLessThanOrEqual(1);
    }
    for (const release of [...takeOrder, ...refund]) {
      const all = rules(release);
      const worst = Math.max(...all.flatMap((a) => all.filter((b) => b !== a).map((b) => similarity(a.text, b.text))));
      expect(worst).toBeLessThanOrEqual(0.29);
    }
  });
});

describe('matching the rules of two releases', () => {
  it('an unchanged rule is the same, whatever its position', () => {
    const rows = compareProcedure('take-order', rules(takeOrder[1]), rules(takeOrder[2]));
    const ask = rows.find((r) => r.new_text === 'Ask what the caller would like to order.');
    expect(ask).toMatchObject({ how: 'same', old_rule_id: ask?.new_rule_id, similarity: 1 });
  });

  it('rewordings in place are matched at their position', () => {
    expect(changed('take-order', takeOrder[0], takeOrder[1])).toEqual([
      ['matched', 'Greet the caller with the name of the restaurant.', "Greet the caller with the restaurant's name."],
      ['matched', 'Look up the account of the caller.', "Look up the caller's account by phone number."],
      ['matched', 'Confirm the delivery address.', 'Confirm the delivery address with the caller.'],
      ['matched', 'Volunteer a price or a description of a dish.', 'Volunteer the price or a description of any dish.'],
    ]);
  });

  it('at the same position 0.35 is enough; a rule moved must keep half its words', () => {
    // 0.4: matched where it stood.
    expect(changed('refund', refund[0], refund[1])).toContainEqual(['matched', 'Check that the payment is within the refund window of 30 days.', 'Check that the payment is less than 30 days old.']);
    // The same rewording, moved to the top: new and removed.
    const moved: Release = { ...refund[0], step: ['Check that the payment is less than 30 days old.', ...refund[0].step!.filter((s) => !s.startsWith('Check'))] };
    expect(changed('refund', refund[0], moved)).toEqual([
      ['new', null, 'Check that the payment is less than 30 days old.'],
      ['removed', 'Check that the payment is within the refund window of 30 days.', null],
    ]);
  });

  it('a rule moved and reworded is matched anywhere in the procedure; an added rule is new', () => {
    expect(changed('take-order', takeOrder[1], takeOrder[2])).toEqual([
      ['new', null, 'Ask whether the order is for pickup or delivery.'],
      ['matched', 'Read the order back to the caller.', 'Read the whole order back to the caller.'],
      ['matched', 'Confirm the delivery address with the caller.', "Confirm the caller's delivery address."],
      ['new', null, 'Take a card number over the phone.'],
    ]);
    expect(changed('refund', refund[1], refund[2])).toEqual([
      ['matched', 'Tell the customer when the money will arrive.', 'Tell the customer when the money will be back on their card.'],
      ['new', null, 'The customer threatens to post a bad review.'],
    ]);
  });

  it('a rewording below the thresholds is a new rule and a removed one; kinds never cross', () => {
    expect(changed('take-order', takeOrder[2], takeOrder[3])).toEqual([
      ['new', null, 'Find out if the food will be collected or brought to them.'],
      // 0.57 against the warning sign it came from, but a step never continues a warning sign.
      ['new', null, 'Tell the caller when a dish is not on the menu.'],
      ['matched', 'Read the whole order back to the caller.', 'Read the order back to the caller.'],
      ['removed', 'Ask whether the order is for pickup or delivery.', null],
      ['new', null, 'The caller is angry or raises their voice.'],
      ['removed', 'The caller sounds upset.', null],
      ['removed', 'The caller asks for a dish that is not on the menu.', null],
    ]);
  });

  it('matches one to one: the better pair wins and the other old rule is removed', () => {
    const from: Release = { step: ['Greet the caller.', 'Confirm the delivery address.', 'Confirm the delivery address and time.'] };
    const to: Release = { step: ['Confirm the delivery address and the time slot.', 'Greet the caller.'] };
    expect(changed('p', from, to)).toEqual([
      ['matched', 'Confirm the delivery address and time.', 'Confirm the delivery address and the time slot.'],
      ['removed', 'Confirm the delivery address.', null],
    ]);
    // At one position too: the new rule continues one old rule only.
    const merged: Release = { step: ['Confirm the delivery address and time.'] };
    expect(changed('p', { step: ['Confirm the delivery address.', 'Confirm the delivery time.'] }, merged)).toEqual([
      ['matched', 'Confirm the delivery address.', 'Confirm the delivery address and time.'],
      ['removed', 'Confirm the delivery time.', null],
    ]);
  });

  describe('an applied suggestion links the rule it edited', () => {
    const rewritten: Release = { ...refund[0], step: ['Ask two security questions before anything else.', ...refund[0].step!.slice(1)] };
    const identity = idOf('step', 'Verify the identity of the customer.');

    it('to the new rule at its position, however different the wording', () => {
      expect(changed('refund', refund[0], rewritten)).toEqual([
        ['new', null, 'Ask two security questions before anything else.'],
        ['removed', 'Verify the identity of the customer.', null],
      ]);
      const [row] = compareProcedure('refund', rules(refund[0]), rules(rewritten), [identity]).filter((r) => r.how !== 'same');
      expect(row).toMatchObject({ how: 'suggestion', old_text: 'Verify the identity of the customer.', new_text: 'Ask two security questions before anything else.', similarity: 0 });
    });

    it('else to the most similar new one (its position now holds an unchanged rule)', () => {
      // The suggestion reworded step 3 and dropped step 2, so position 3 holds step 4, unchanged.
      const edited: Release = {
        ...refund[0],
        step: ['Verify the identity of the customer.', 'Make sure the payment is no older than 30 days.', 'Issue the refund to the original payment method.', 'Tell the customer when the money will arrive.'],
      };
      const check = idOf('step', 'Check that the payment is within the refund window of 30 days.');
      expect(changed('refund', refund[0], edited, [check])).toEqual([
        ['suggestion', 'Check that the payment is within the refund window of 30 days.', 'Make sure the payment is no older than 30 days.'],
        ['removed', 'Find the payment in the order history.', null],
      ]);
    });

    it('comes before position and similarity, and a rule edited twice is linked once', () => {
      // Without the suggestion, old step 1 takes new step 1 at its position.
      const from: Release = { step: ['Confirm the address.', 'Confirm the address and the phone number.'] };
      const to: Release = { step: ['Confirm the address and the phone.'] };
      expect(changed('p', from, to)).toEqual([
        ['matched', 'Confirm the address.', 'Confirm the address and the phone.'],
        ['removed', 'Confirm the address and the phone number.', null],
      ]);
      // The suggestion edited step 2; there is no step 2 now, so it takes the most similar new one.
      const second = idOf('step', 'Confirm the address and the phone number.');
      expect(changed('p', from, to, [second, second])).toEqual([
        ['suggestion', 'Confirm the address and the phone number.', 'Confirm the address and the phone.'],
        ['removed', 'Confirm the address.', null],
      ]);
    });

    describe('an edit that inserts a rule of the same kind before the one it rewords', () => {
      const greet = 'Greet the caller with the name of the restaurant.';
      const ask = 'Ask what the caller would like to order.';
      const readBack = 'Read the order back to the caller.';
      const inserted = 'Check whether the caller has a food allergy.';
      const reworded = 'Ask what the caller would like to order, then wait for the answer.';
      const from: Release = { step: [greet, ask, readBack] };
      const to: Release = { step: [greet, inserted, reworded, readBack] };

      it('links the rewording, not the inserted rule that now holds the old position', () => {
        // Matching alone gets it right: the inserted rule is unlike the old wording.
        expect(changed('p', from, to)).toEqual([
          ['new', null, inserted],
          ['matched', ask, reworded],
        ]);
        // The suggestion's link is the same pair, whether the rules its edit put in are known or not.
        for (const edit of [idOf('step', ask), { rule_id: idOf('step', ask), new_rule_ids: [idOf('step', inserted), idOf('step', reworded)] }]) {
          expect(changed('p', from, to, [edit])).toEqual([
            ['new', null, inserted],
            ['suggestion', ask, reworded],
          ]);
          expect(compareProcedure('p', rules(from), rules(to), [edit]).find((r) => r.how === 'suggestion')).toMatchObject({ old_rule_id: idOf('step', ask), new_rule_id: idOf('step', reworded), similarity: 0.667 });
        }
      });

      it("takes the rules its own edit put in over a more similar one someone else added", () => {
        // The suggestion rewrote step 2 in place; a hand edit published with it added a step much like the old wording.
        const rewrite = 'Take down the dishes the caller chooses.';
        const drink = 'Ask whether the caller would like a drink with the order.';
        const edited: Release = { step: [greet, rewrite, readBack, drink] };
        expect(changed('p', from, edited)).toEqual([
          ['new', null, rewrite],
          ['matched', ask, drink],
        ]);
        expect(changed('p', from, edited, [{ rule_id: idOf('step', ask), new_rule_ids: [idOf('step', rewrite)] }])).toEqual([
          ['suggestion', ask, rewrite],
          ['new', null, drink],
        ]);
      });
    });
  });

  it('compares every procedure of two releases; an added procedure is all new, a dropped one all removed', () => {
    const rows = compareReleases([procedure('take-order', takeOrder[0]), procedure('refund', refund[0])], [procedure('take-order', takeOrder[1]), procedure('returns', { step: ['Accept the parcel.'] })]);
    const count = (id: string, how: string) => rows.filter((r) => r.procedure_id === id && r.how === how).length;
    expect([count('refund', 'removed'), rows.filter((r) => r.procedure_id === 'refund').length]).toEqual([8, 8]);
    expect(rows.filter((r) => r.procedure_id === 'returns')).toEqual([
      { procedure_id: 'returns', kind: 'step', old_rule_id: null, new_rule_id: idOf('step', 'Accept the parcel.'), old_text: null, new_text: 'Accept the parcel.', how: 'new', similarity: null },
    ]);
    expect(count('take-order', 'matched')).toBe(4);
    // Procedures in id order, each with its own rows.
    expect([...new Set(rows.map((r) => r.procedure_id))]).toEqual(['refund', 'returns', 'take-order']);
  });

  it('suggestions apply only to their own procedure', () => {
    const identity = idOf('step', 'Verify the identity of the customer.');
    const rewritten: Release = { step: ['Ask two security questions.'] };
    const rows = compareReleases([procedure('refund', refund[0]), procedure('other', refund[0])], [procedure('refund', rewritten), procedure('other', rewritten)], [{ procedure_id: 'refund', rule_id: identity }]);
    expect(rows.filter((r) => r.how === 'suggestion').map((r) => r.procedure_id)).toEqual(['refund']);
  });
});

describe('lineage links across releases', () => {
  /** Publishes the fixture releases one after the other, as a store would. */
  function publishAll(id: string, releases: Release[]): { lineage: Lineage; perRelease: RuleChange[][]; returned: LineageLink[][] } {
    let lineage = new Lineage();
    const perRelease: RuleChange[][] = [];
    const returned: LineageLink[][] = [];
    releases.forEach((release, i) => {
      const rows = compareProcedure(id, i === 0 ? [] : rules(releases[i - 1]), rules(release));
      perRelease.push(rows);
      const published = lineage.withPublished(linksFromChanges(rows));
      lineage = published.lineage;
      returned.push(published.returned);
    });
    return { lineage, perRelease, returned };
  }
  const step = (text: string) => idOf('step', text);

  it('every wording of a rule resolves to its first wording, the chain oldest first', () => {
    const { lineage } = publishAll('take-order', takeOrder);
    const latest = step("Confirm the caller's delivery address.");
    expect(lineage.lineageId('take-order', latest)).toBe(step('Confirm the delivery address.'));
    expect(lineage.chain('take-order', latest).map((l) => [l.how, l.previous_rule_id, l.rule_id])).toEqual([
      ['new', null, step('Confirm the delivery address.')],
      ['matched', step('Confirm the delivery address.'), step('Confirm the delivery address with the caller.')],
      ['matched', step('Confirm the delivery address with the caller.'), latest],
    ]);
    // A rule never reworded is its own lineage; a rewording below the threshold starts one.
    expect(lineage.lineageId('take-order', step('Ask what the caller would like to order.'))).toBe(step('Ask what the caller would like to order.'));
    const rewrite = step('Find out if the food will be collected or brought to them.');
    expect(lineage.lineageId('take-order', rewrite)).toBe(rewrite);
  });

  it('a revert keeps its own row (never overwritten, no cycle); its return is a step of its own', () => {
    const { lineage, perRelease, returned } = publishAll('take-order', takeOrder);
    const original = step('Read the order back to the caller.');
    const reworded = step('Read the whole order back to the caller.');
    // Release 4 matched the reverted wording to the one it replaced ...
    expect(perRelease[3].find((r) => r.new_rule_id === original)).toMatchObject({ how: 'matched', old_rule_id: reworded });
    // ... but the wording already had its row from release 1, which stays.
    expect(lineage.link('take-order', original)).toEqual({ procedure_id: 'take-order', rule_id: original, previous_rule_id: null, how: 'new', similarity: null });
    expect(lineage.lineageId('take-order', original)).toBe(original);
    expect(lineage.lineageId('take-order', reworded)).toBe(original);
    // The publish that brought it back says so: the link it made, stored as a step at that release.
    expect(returned.map((r) => r.map((l) => l.rule_id))).toEqual([[], [], [], [original]]);
    expect(returned[3][0]).toMatchObject({ previous_rule_id: reworded, how: 'matched' });
  });

  it('a later publish never overwrites a link', () => {
    const first: LineageLink = { procedure_id: 'p', rule_id: 'b', previous_rule_id: 'a', how: 'matched', similarity: 0.5 };
    const { lineage, added, returned } = new Lineage([first]).withPublished([
      { procedure_id: 'p', rule_id: 'b', previous_rule_id: 'x', how: 'suggestion', similarity: 0.9 },
      { procedure_id: 'p', rule_id: 'c', previous_rule_id: 'b', how: 'matched', similarity: 0.7 },
      // Rows are per procedure: the same id elsewhere is another rule.
      { procedure_id: 'q', rule_id: 'b', previous_rule_id: null, how: 'new', similarity: null },
    ]);
    expect(lineage.link('p', 'b')).toEqual(first);
    expect(added.map((l) => `${l.procedure_id}/${l.rule_id}`)).toEqual(['p/c', 'q/b']);
    // b had a row (it was in an earlier release): the publish brought it back.
    expect(returned).toEqual([{ procedure_id: 'p', rule_id: 'b', previous_rule_id: 'x', how: 'suggestion', similarity: 0.9 }]);
    expect(lineage.lineageId('p', 'c')).toBe('a');
    expect(lineage.lineageId('q', 'b')).toBe('b');
  });

  it('a rule that predates the rows starts its lineage', () => {
    const lineage = new Lineage([{ procedure_id: 'p', rule_id: 'b', previous_rule_id: 'a', how: 'matched', similarity: 0.5 }]);
    expect(lineage.lineageId('p', 'b')).toBe('a');
    expect(lineage.lineageId('p', 'a')).toBe('a');
    expect(lineage.chain('p', 'a')).toEqual([]);
  });

  describe('manual links', () => {
    const base = () =>
      new Lineage([
        { procedure_id: 'p', rule_id: 'a', previous_rule_id: null, how: 'new', similarity: null },
        { procedure_id: 'p', rule_id: 'b', previous_rule_id: 'a', how: 'matched', similarity: 0.6 },
        { procedure_id: 'p', rule_id: 'c', previous_rule_id: 'b', how: 'matched', similarity: 0.6 },
        { procedure_id: 'p', rule_id: 'x', previous_rule_id: null, how: 'new', similarity: null },
      ]);

    it('say whether a link would close a cycle', () => {
      expect(base().wouldCycle('p', 'a', 'c')).toBe(true);
      expect(base().wouldCycle('p', 'b', 'b')).toBe(true);
      expect(base().wouldCycle('p', 'x', 'c')).toBe(false);
      expect(base().wouldCycle('q', 'a', 'c')).toBe(false);
    });

    it('a cycle is refused with the path it would close', () => {
      expect(() => base().withManual('p', 'a', 'c')).toThrow(LineageCycleError);
      expect(() => base().withManual('p', 'a', 'c')).toThrow('a cycle in the rule lineage of procedure p: a -> c -> b -> a');
    });

    it('a link replaces the row and moves the later wordings with it', () => {
      const { lineage, link } = base().withManual('p', 'a', 'x');
      expect(link).toEqual({ procedure_id: 'p', rule_id: 'a', previous_rule_id: 'x', how: 'manual', similarity: null });
      expect(lineage.lineageId('p', 'c')).toBe('x');
    });

    it('unlinking makes the rule a new lineage, kept as a manual row', () => {
      const { lineage } = base().withManual('p', 'b', null);
      expect(lineage.link('p', 'b')).toMatchObject({ previous_rule_id: null, how: 'manual' });
      expect(lineage.lineageId('p', 'c')).toBe('b');
      expect(lineage.lineageId('p', 'a')).toBe('a');
      // A later publish does not overwrite the manual row either.
      expect(lineage.withPublished([{ procedure_id: 'p', rule_id: 'b', previous_rule_id: 'a', how: 'matched', similarity: 0.6 }]).added).toEqual([]);
    });

    it('a cycle already in stored rows is reported, not followed forever', () => {
      const broken = new Lineage([
        { procedure_id: 'p', rule_id: 'a', previous_rule_id: 'b', how: 'manual', similarity: null },
        { procedure_id: 'p', rule_id: 'b', previous_rule_id: 'a', how: 'manual', similarity: null },
      ]);
      expect(() => broken.lineageId('p', 'a')).toThrow(LineageCycleError);
    });
  });
});
