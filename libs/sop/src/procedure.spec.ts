import fc from 'fast-check';
import { ruleId } from './ids';
import { parseProcedure } from './procedure';
import { formatIssue } from './types';

const TAKE_ORDER = `# Take an order
Goal: The order is placed and read back to the caller.
Applies when: The caller wants to order food.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Confirm the delivery address. [when: the caller wants delivery]
4. Read the order back to the caller. [required]

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Offer a callback from the manager.
`;

const parse = (text: string) => parseProcedure('procedures/p.md', 'p', text);
const errors = (text: string) => parse(text).issues.map(formatIssue);

describe('parseProcedure', () => {
  it('reads the format: title, goal, applies when, and each kind with text, index and annotations', () => {
    const { procedure, issues } = parseProcedure('procedures/take-order.md', 'take-order', TAKE_ORDER);
    expect(issues).toEqual([]);
    expect(procedure).toMatchObject({
      procedure_id: 'take-order',
      name: 'Take an order',
      goal: 'The order is placed and read back to the caller.',
      applies_when: 'The caller wants to order food.',
    });
    expect(procedure.rules.map((r) => [r.kind, r.index, r.text, r.tool, r.required, r.when, r.action, r.line])).toEqual([
      ['step', 1, 'Greet the caller with the name of the restaurant.', null, false, null, null, 6],
      ['step', 2, 'Look up the account of the caller.', 'lookup_account', true, null, null, 7],
      ['step', 3, 'Confirm the delivery address.', null, false, 'the caller wants delivery', null, 8],
      ['step', 4, 'Read the order back to the caller.', null, true, null, null, 9],
      ['never', 1, 'Volunteer a price or a description of a dish.', null, false, null, null, 12],
      ['warning', 1, 'The caller sounds upset.', null, false, null, 'Offer a callback from the manager.', 15],
    ]);
  });

  it('collapses whitespace, joins continuation lines, and keeps commas inside a when: condition', () => {
    const { procedure, issues } = parse(
      '# T\n\n## Steps\n1.   Say   hello\n   to the caller.\n2. Offer dessert. [when: the order is large, or the caller asks, required]\n',
    );
    expect(issues).toEqual([]);
    expect(procedure.rules[0].text).toBe('Say hello to the caller.');
    expect(procedure.rules[1]).toMatchObject({ when: 'the order is large, or the caller asks', required: true });
  });

  it('has no goal or applies_when when they are not written, and sections are optional', () => {
    const { procedure, issues } = parse('# Just nevers\n\n## Never\n- Swear.\n');
    expect(issues).toEqual([]);
    expect(procedure).toMatchObject({ goal: null, applies_when: null });
    expect(procedure.rules.map((r) => r.kind)).toEqual(['never']);
  });

  it('orders rules steps, nevers, warning signs whatever the order of the sections', () => {
    const { procedure } = parse('# T\n## Warning signs\n- W.\n## Never\n- N.\n## Steps\n1. S.\n');
    expect(procedure.rules.map((r) => r.kind)).toEqual(['step', 'never', 'warning']);
  });

  it.each([
    ['an unknown section', '# T\n\n## Notes\n- x\n## Steps\n1. A.\n', ['procedures/p.md:3: unknown section "## Notes" (known: ## Steps, ## Never, ## Warning signs)']],
    ['a sub-heading', '# T\n## Steps\n1. A.\n### More\n', ['procedures/p.md:4: unknown section "### More" (known: ## Steps, ## Never, ## Warning signs)']],
    ['an unknown annotation', '# T\n## Steps\n1. A. [tool: x, requird]\n', ['procedures/p.md:3: unknown annotation "requird" (known: tool: NAME, required, when: CONDITION)']],
    ['an empty step', '# T\n## Steps\n1. A.\n2.\n', ['procedures/p.md:4: empty step']],
    ['an item that is only an annotation', '# T\n## Steps\n1. [required]\n', ['procedures/p.md:3: empty step']],
    ['an empty never rule', '# T\n## Never\n- \n- B.\n', ['procedures/p.md:3: empty never rule']],
    ['an empty warning sign', '# T\n## Warning signs\n- -> Do it.\n', ['procedures/p.md:3: empty warning sign']],
    ['an empty action', '# T\n## Warning signs\n- Upset. ->\n', ['procedures/p.md:3: empty action after "->"']],
    ['a duplicate step', '# T\n## Steps\n1. Greet.\n2. Ask.\n3.  Greet.\n', ['procedures/p.md:5: duplicate step: the same text as line 3']],
    ['a duplicate never rule', '# T\n## Never\n- Swear.\n- Swear. \n', ['procedures/p.md:4: duplicate never rule: the same text as line 3']],
    ['a when: outside Steps', '# T\n## Never\n- Swear. [when: angry]\n', ['procedures/p.md:3: "when:" belongs to steps only']],
    ['a tool: outside Steps', '# T\n## Warning signs\n- Upset. [tool: x]\n', ['procedures/p.md:3: "tool:" belongs to steps only']],
    ['required outside Steps', '# T\n## Never\n- Swear. [required]\n', ['procedures/p.md:3: "required" belongs to steps only']],
    ['a tool: without a name', '# T\n## Steps\n1. A. [tool:]\n', ['procedures/p.md:3: "tool:" needs a tool name']],
    ['a when: without a condition', '# T\n## Steps\n1. A. [when: ]\n', ['procedures/p.md:3: "when:" needs a condition']],
    ['an annotation twice', '# T\n## Steps\n1. A. [required, required]\n', ['procedures/p.md:3: "required" annotated twice']],
    ['two pairs of brackets', '# T\n## Steps\n1. A. [tool: x] [required]\n', ['procedures/p.md:3: annotations go in one pair of brackets: [tool: NAME, required, when: CONDITION]']],
    ['an annotation before the final period', '# T\n## Steps\n1. Place the order [tool: x].\n', ['procedures/p.md:3: annotation not at the end of the item: "[tool: x]" (annotations go last)']],
    ['an annotation first', '# T\n## Steps\n1. [required] Read back.\n', ['procedures/p.md:3: annotation not at the end of the item: "[required]" (annotations go last)']],
    ['a line after the annotation', '# T\n## Steps\n1. Place the order. [tool: x, required]\n   Then say so.\n', ['procedures/p.md:3: annotation not at the end of the item: "[tool: x, required]" (annotations go last)']],
    ['an annotation in the middle of a never rule', '# T\n## Never\n- Swear [when: angry] at all.\n', ['procedures/p.md:3: annotation not at the end of the item: "[when: angry]" (annotations go last)']],
    ['an annotation in the middle, and one at the end', '# T\n## Steps\n1. A [required] B. [tool: x]\n', ['procedures/p.md:3: annotation not at the end of the item: "[required]" (annotations go last)']],
    ['an unclosed annotation', '# T\n## Steps\n1. A. [tool: x\n', ['procedures/p.md:3: annotation without its closing "]"']],
    ['a bulleted step', '# T\n## Steps\n- A.\n', ['procedures/p.md:3: ## Steps is a numbered list ("1. ...")']],
    ['a numbered never rule', '# T\n## Never\n1. A.\n', ['procedures/p.md:3: ## Never is a bulleted list ("- ...")']],
    ['a nested list', '# T\n## Steps\n1. A.\n   - detail\n', ['procedures/p.md:4: nested list item: each rule is one item of its section\'s list']],
    ['text outside an item', '# T\n## Steps\n1. A.\n\nSome prose.\n', ['procedures/p.md:5: text outside a list item in ## Steps']],
    ['no title', 'Goal: g\n## Steps\n1. A.\n', ['procedures/p.md:1: a procedure starts with its # title']],
    ['an empty file', '', ['procedures/p.md:1: a procedure starts with its # title']],
    ['a second title', '# T\n# U\n', ['procedures/p.md:2: a second # title (the first is "T")']],
    ['an empty title', '#\n## Never\n- A.\n', ['procedures/p.md:1: empty # title']],
    ['a second Goal:', '# T\nGoal: a\nGoal: b\n', ['procedures/p.md:3: a second Goal: (the first is at line 2)']],
    ['an empty Applies when:', '# T\nApplies when:\n', ['procedures/p.md:2: empty Applies when:']],
    ['prose before the sections', '# T\nGoal: g\n\nThis is about orders.\n## Never\n- A.\n', ['procedures/p.md:4: unexpected text before the first section (only Goal: and Applies when: go here)']],
    ['a section twice', '# T\n## Never\n- A.\n## Never\n- B.\n', ['procedures/p.md:4: ## Never appears twice (first at line 2)']],
    ['an empty section', '# T\n## Steps\n## Never\n- A.\n', ['procedures/p.md:2: ## Steps has no items']],
  ])('reports %s with its line', (_what, text, expected) => {
    expect(errors(text)).toEqual(expected);
  });

  it('keeps brackets that are not an annotation in the text, wherever they are', () => {
    const { procedure, issues } = parse('# T\n## Steps\n1. Ask for the [name] of the caller. [required]\n');
    expect(issues).toEqual([]);
    expect(procedure.rules[0]).toMatchObject({ text: 'Ask for the [name] of the caller.', required: true });
  });

  it('reports every error in a file, not just the first, in line order', () => {
    const got = errors('# T\n## Steps\n1. A. [bogus]\n2.\n## Never\n- X. [when: y]\n- X.\n## Extra\n');
    expect(got.map((e) => e.split(':')[1])).toEqual(['3', '4', '6', '7', '8']);
  });

  it('a continued Goal: line is part of the goal', () => {
    expect(parse('# T\nGoal: The order is placed\n  and read back.\n').procedure.goal).toBe('The order is placed and read back.');
  });

  describe('rule ids', () => {
    const proc = (steps: string[]) => parse(`# T\n## Steps\n${steps.map((s, i) => `${i + 1}. ${s}`).join('\n')}\n`).procedure;

    it('keep their id when a rule moves, is re-annotated or re-wrapped, or lives in another procedure', () => {
      const a = proc(['Greet the caller.', 'Take the order.']);
      const b = proc(['Take the order. [required]', 'Say goodbye.', 'Greet   the\n   caller.']);
      const other = parseProcedure('procedures/q.md', 'q', '# Other\n## Steps\n1. Take the order.\n').procedure;
      expect(b.rules[0].rule_id).toBe(a.rules[1].rule_id);
      expect(b.rules[2].rule_id).toBe(a.rules[0].rule_id);
      expect(other.rules[0].rule_id).toBe(a.rules[1].rule_id);
    });

    it('change when the wording changes, and differ between kinds with the same text', () => {
      const a = proc(['Greet the caller.']);
      const b = proc(['Greet the caller warmly.']);
      expect(b.rules[0].rule_id).not.toBe(a.rules[0].rule_id);
      const n = parse('# T\n## Never\n- Greet the caller.\n').procedure;
      expect(n.rules[0].rule_id).not.toBe(a.rules[0].rule_id);
      expect(a.rules[0].rule_id).toBe(ruleId('step', 'Greet the caller.'));
      expect(a.rules[0].rule_id).toMatch(/^[0-9a-f]{16}$/);
    });

    it('a procedure version changes with any change to the file, and only then', () => {
      expect(parse(TAKE_ORDER).procedure.version).toBe(parse(TAKE_ORDER).procedure.version);
      expect(parse(TAKE_ORDER + '\n').procedure.version).not.toBe(parse(TAKE_ORDER).procedure.version);
    });
  });

  it('never throws: any text gives a procedure and issues (property)', () => {
    const pieces = fc.constantFrom(
      '# ', '## Steps', '## Never', '## Warning signs', '## ', '### x', '1. ', '2) ', '- ', '* ', '  ', '\n', '\r\n', '[', ']', ',', '->',
      'tool:', 'required', 'when:', 'Goal:', 'Applies when:', 'text', '\t', '#', '\uFEFF', '  - ', '9999999999. ',
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string()), { maxLength: 60 }), (parts) => {
        const text = parts.join('');
        const r = parse(text);
        expect(Array.isArray(r.issues)).toBe(true);
        for (const i of r.issues) {
          expect(i.line).toBeGreaterThanOrEqual(1);
          expect(i.message.length).toBeGreaterThan(0);
        }
        for (const rule of r.procedure.rules) expect(rule.text).toBe(rule.text.trim());
      }),
      { numRuns: 2000 },
    );
  });
});

describe('a procedure file with long runs of spaces', () => {
  it('is read at once: a line holding 100,000 spaces before its text (no backtracking over them)', () => {
    const t0 = Date.now();
    const { procedure } = parseProcedure('procedures/p.md', 'p', `# Spaces\n## Steps\n1. Greet the caller.${' '.repeat(100_000)}x   \n2. Take the order.   \n`);
    expect(procedure.rules.map((r) => r.text)).toEqual(['Greet the caller. x', 'Take the order.']);
    // With trailing spaces cut by /\s+$/ this took about 25 s.
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
