import fc from 'fast-check';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { compileFiles, compileFolder, FolderError } from './compile';
import { toLock } from './lock';
import { formatIssue } from './types';

const proc = (title: string) => `# ${title}\n\n## Steps\n1. Do ${title}.\n`;
const errors = (files: Record<string, string>) => compileFiles(files).errors.map(formatIssue);

describe('compileFiles', () => {
  it("gives an agent its own procedures then its groups', in order, each once", () => {
    const c = compileFiles({
      'procedures/a.md': proc('a'),
      'procedures/b.md': proc('b'),
      'procedures/c.md': proc('c'),
      'procedures/d.md': proc('d'),
      'groups/g1.yaml': 'procedures: [d, b]\n',
      'groups/g2.yaml': 'procedures: [a, c]\n',
      'agents/phone.yaml': 'instructions: Answer the phone.\nprocedures: [c, b]\ngroups: [g1, g2]\n',
    });
    expect(c.errors).toEqual([]);
    expect(c.agents).toHaveLength(1);
    expect(c.agents[0].procedures).toEqual(['c', 'b', 'd', 'a']);
    expect(c.groups.map((g) => g.group)).toEqual(['g1', 'g2']);
  });

  it('compiles the procedures into the instructions, in the agent order, readable', () => {
    const c = compileFiles({
      'procedures/take-order.md': '# Take an order\nGoal: Placed.\n\n## Steps\n1. Greet.\n2. Look up. [tool: lookup, required]\n3. Confirm address. [when: delivery]\n## Never\n- Quote prices.\n## Warning signs\n- Upset. -> Offer a callback.\n- Silence.\n',
      'procedures/close.md': '# Close\nApplies when: the order is placed.\n## Steps\n1. Say goodbye.\n',
      'agents/phone.yaml': 'instructions: |\n  You answer the phone at Luigi\'s.\nprocedures: [take-order, close]\n',
    });
    expect(c.errors).toEqual([]);
    expect(c.agents[0].instructions).toBe(
      [
        "You answer the phone at Luigi's.",
        '',
        '# Procedures',
        '',
        'Follow each procedure below when it applies.',
        '',
        '## Take an order',
        'Goal: Placed.',
        'Applies: always.',
        '',
        'Steps, in this order:',
        '1. Greet.',
        '2. Look up. (Required. Use the tool lookup.)',
        '3. Confirm address. (Only when delivery.)',
        '',
        'Never:',
        '- Quote prices.',
        '',
        'Warning signs:',
        '- Upset. Then: Offer a callback.',
        '- Silence.',
        '',
        '## Close',
        'Applies when: the order is placed.',
        '',
        'Steps, in this order:',
        '1. Say goodbye.',
        '',
      ].join('\n'),
    );
  });

  it.each([
    ['a missing procedure in an agent', { 'agents/x.yaml': 'procedures:\n  - a\n  - nope\n' }, ['agents/x.yaml:3: unknown procedure "nope" (no procedures/nope.md)']],
    ['a missing procedure in a group', { 'groups/g.yaml': 'procedures: [nope]\n' }, ['groups/g.yaml:1: unknown procedure "nope" (no procedures/nope.md)']],
    ['a missing group', { 'agents/x.yaml': 'procedures: [a]\ngroups: [nope]\n' }, ['agents/x.yaml:2: unknown group "nope" (no groups/nope.yaml)']],
    ['an unknown key', { 'agents/x.yaml': 'procedures: [a]\nprocedure: [a]\n' }, ['agents/x.yaml:2: unknown key "procedure" (known: instructions, procedures, groups)']],
    ['an unknown key in a group', { 'groups/g.yaml': 'procedures: [a]\nagents: [x]\n' }, ['groups/g.yaml:2: unknown key "agents" (known: procedures)']],
    ['instructions that are not text', { 'agents/x.yaml': 'instructions:\n  - a\n' }, ['agents/x.yaml:2: instructions: expected text']],
    ['procedures that are not a list', { 'agents/x.yaml': 'procedures: a\n' }, ['agents/x.yaml:1: procedures: expected a list of procedure ids']],
    ['a list item that is not a name', { 'groups/g.yaml': 'procedures:\n  - a\n  - 3\n  - {x: 1}\n' }, ['groups/g.yaml:3: procedures: expected a procedure id, got number 3', 'groups/g.yaml:4: procedures: expected a procedure id, got a mapping']],
    ['a name listed twice', { 'agents/x.yaml': 'procedures:\n  - a\n  - a\n' }, ['agents/x.yaml:3: procedures: "a" is listed twice (first at line 2)']],
    ['a YAML syntax error', { 'agents/x.yaml': 'procedures: [a\ngroups: x\n' }, [expect.stringMatching(/^agents\/x\.yaml:2: YAML: .*end with a \]/)]],
    ['a key twice', { 'agents/x.yaml': 'procedures: [a]\nprocedures: [a]\n' }, [expect.stringMatching(/^agents\/x\.yaml:2: YAML: .*[Mm]ap keys must be unique/)]],
    ['an empty YAML file', { 'groups/g.yaml': '' }, ['groups/g.yaml:1: empty file: expected procedures: [ids]']],
    ['a YAML file that is not a mapping', { 'groups/g.yaml': '- a\n' }, ['groups/g.yaml:1: expected a mapping (procedures: [ids])']],
    ['a bad procedure id', { 'procedures/Take_Order.md': proc('x') }, ['procedures/Take_Order.md:1: bad file name: the id "Take_Order" must be lower-case letters, digits and hyphens']],
    ['a wrong extension', { 'agents/x.yml': 'procedures: [a]\n' }, ['agents/x.yml:1: bad file name: files in agents/ end in .yaml']],
    ['a sub-folder', { 'procedures/old/': '' }, ['procedures/old/:1: bad file name: procedures/ holds files directly (procedures/<id>.md)']],
    ['a file outside the three folders', { 'notes/x.md': 'x' }, ['notes/x.md:1: not a file of a procedures folder (procedures/<id>.md, agents/<name>.yaml, groups/<name>.yaml)']],
  ])('reports %s as FILE:LINE: message', (_what, files, expected) => {
    expect(errors({ 'procedures/a.md': proc('a'), ...files })).toEqual(expected);
  });

  it('reports every error of every file, sorted by file then line', () => {
    const got = errors({
      'procedures/a.md': '# A\n## Steps\n1.\n## Nope\n',
      'agents/z.yaml': 'procedures: [nope]\nextra: 1\n',
      'groups/g.yaml': 'procedures: [a, gone]\n',
    });
    expect(got.map((e) => e.split(': ')[0])).toEqual(['agents/z.yaml:1', 'agents/z.yaml:2', 'groups/g.yaml:1', 'procedures/a.md:3', 'procedures/a.md:4']);
  });

  it('lock.json has the format, sorted, with its key order', () => {
    const c = compileFiles({
      'procedures/b.md': '# B\nGoal: g\nApplies when: w\n## Steps\n1. Look up. [tool: lookup_account, required]\n',
      'procedures/a.md': proc('a'),
      'agents/z.yaml': 'procedures: [b]\n',
      'agents/y.yaml': 'procedures: [a]\n',
    });
    const lock = toLock(c);
    expect(lock.procedures.map((p) => p.procedure_id)).toEqual(['a', 'b']);
    expect(lock.agents.map((a) => a.agent)).toEqual(['y', 'z']);
    expect(Object.keys(lock)).toEqual(['procedures', 'agents']);
    expect(Object.keys(lock.procedures[1])).toEqual(['procedure_id', 'name', 'version', 'goal', 'applies_when', 'rules']);
    expect(lock.procedures[1].rules[0]).toEqual({
      rule_id: expect.stringMatching(/^[0-9a-f]{16}$/), kind: 'step', index: 1, text: 'Look up.', tool: 'lookup_account', required: true, when: null, action: null,
    });
    expect(Object.keys(lock.procedures[1].rules[0])).toEqual(['rule_id', 'kind', 'index', 'text', 'tool', 'required', 'when', 'action']);
    expect(Object.keys(lock.agents[0])).toEqual(['agent', 'procedures', 'instructions']);
  });
});

describe('compileFiles never throws (property)', () => {
  it('any file names and contents give a result, every error with a file and a line', () => {
    const names = fc.oneof(
      fc.constantFrom('procedures/a.md', 'procedures/b.md', 'agents/x.yaml', 'groups/g.yaml', 'agents/X.yaml', 'groups/', 'other.txt', 'procedures/a/b.md'),
      fc.string().map((s) => `agents/${s}.yaml`),
    );
    const yamlish = fc.constantFrom('procedures: [a, b]\n', 'groups: [g]\n', 'instructions: |\n  hi\n', ': :\n', '- [\n', '{a: 1}', 'procedures: {x: 1}\n', '&a [*a]', '!!binary x', '\t', '');
    const text = fc.array(fc.oneof(yamlish, fc.string(), fc.constantFrom('# T\n', '## Steps\n', '1. A. [tool: x]\n', '- B.\n')), { maxLength: 8 }).map((p) => p.join(''));
    fc.assert(
      fc.property(fc.dictionary(names, text, { maxKeys: 6 }), (files) => {
        const c = compileFiles(files);
        for (const e of c.errors) {
          expect(Object.keys(files).map((f) => f)).toContain(e.file);
          expect(e.line).toBeGreaterThanOrEqual(1);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('compileFolder', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sop-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };

  it('reads the three folders only (lock.json and other files beside them are not read), and skips dotfiles', () => {
    write('procedures/a.md', proc('a'));
    write('procedures/.a.md.swp', 'junk');
    write('agents/x.yaml', 'procedures: [a]\n');
    write('lock.json', '{}');
    write('README.md', 'notes');
    const c = compileFolder(dir);
    expect(c.errors).toEqual([]);
    expect(c.procedures.map((p) => p.procedure_id)).toEqual(['a']);
  });

  it('reports a sub-folder instead of skipping it', () => {
    write('procedures/old/a.md', proc('a'));
    expect(compileFolder(dir).errors.map(formatIssue)).toEqual(['procedures/old/:1: bad file name: procedures/ holds files directly (procedures/<id>.md)']);
  });

  it('refuses a folder that is missing or has none of the three folders', () => {
    expect(() => compileFolder(path.join(dir, 'nope'))).toThrow(FolderError);
    expect(() => compileFolder(dir)).toThrow(/not a procedures folder/);
  });
});
