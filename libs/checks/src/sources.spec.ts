import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseJsonl } from '@neatroots/spans';
import {
  CheckParseCache,
  defaultLibraryDir,
  listCheckFiles,
  loadChecks,
  neatrootsHome,
  readProjects,
  registerProject,
} from './sources';
import { CheckError, checkProblems, isRuleCheck, type RuleCheck } from './types';

let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-sources-'));
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

function write(file: string, text: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

const countRule = (id: string, n: number, extra = '') => `id: ${id}\nkind: rule\nrule: { type: count, at_least: ${n} }\n${extra}`;

/** A library, a home with user checks and two registered projects. */
function layout() {
  const library = path.join(tmp, 'library');
  const home = path.join(tmp, 'home');
  const projA = path.join(tmp, 'a');
  const projB = path.join(tmp, 'b');
  const files = {
    lib: write(path.join(library, 'loop.yaml'), [countRule('c1', 1), countRule('c2', 1), countRule('c3', 1), countRule('c4', 1)].join('---\n')),
    user: write(path.join(home, 'checks', 'mine.yml'), [countRule('c2', 2), countRule('c3', 2), countRule('c4', 2)].join('---\n')),
    projA: write(path.join(projA, '.neatroots', 'checks', 'sub', 'a.yaml'), [countRule('c3', 3), countRule('c4', 3), countRule('a-only', 3)].join('---\n')),
    projB: write(path.join(projB, '.neatroots', 'checks', 'b.yaml'), countRule('b-own', 5, 'applies_to: { project: [proj-b] }\n')),
  };
  registerProject(home, { name: 'proj-a', path: projA, steering: true });
  registerProject(home, { name: 'proj-b', path: projB, steering: false });
  return { library, home, projA, projB, files };
}

describe('loadChecks', () => {
  it('loads the four sources in order, later winning on the same id, and says what overrides what', () => {
    const { library, home, files } = layout();
    const database = [{ id: 'c4', yaml: countRule('c4', 4) }];
    const { checks, entries, warnings, errors } = loadChecks({ library, home, database });
    expect(warnings).toEqual([]);
    expect(errors).toEqual([]);
    const at = (id: string) => checks.filter((c) => c.id === id).map((c) => [c.source, (c as RuleCheck).rule.type === 'count' && (c as { rule: { at_least: number } }).rule.at_least]);
    expect(at('c1')).toEqual([['library', 1]]);
    expect(at('c2')).toEqual([['user', 2]]);
    // A project's version wins in that project only; the user's version stays elsewhere.
    expect(at('c3')).toEqual([['user', 2], ['project', 3]]);
    expect(checks.find((c) => c.id === 'c3' && c.source === 'user')?.applies_to).toEqual({ not_project: ['proj-a'] });
    expect(checks.find((c) => c.id === 'c3' && c.source === 'project')?.applies_to).toEqual({ project: ['proj-a'] });
    // A database check without a project replaces every earlier version.
    expect(at('c4')).toEqual([['database', 4]]);
    expect(checks.find((c) => c.id === 'c4')?.file).toBeUndefined();

    expect(entries).toEqual([
      { id: 'c1', source: 'library', file: files.lib, overrides: [] },
      { id: 'c2', source: 'user', file: files.user, overrides: [{ source: 'library', file: files.lib }] },
      { id: 'c3', source: 'user', file: files.user, except_projects: ['proj-a'], overrides: [{ source: 'library', file: files.lib }] },
      {
        id: 'c3', source: 'project', file: files.projA, projects: ['proj-a'],
        overrides: [{ source: 'library', file: files.lib }, { source: 'user', file: files.user }],
      },
      {
        id: 'c4', source: 'database',
        overrides: [{ source: 'library', file: files.lib }, { source: 'user', file: files.user }, { source: 'project', file: files.projA }],
      },
      { id: 'a-only', source: 'project', file: files.projA, projects: ['proj-a'], overrides: [] },
      { id: 'b-own', source: 'project', file: files.projB, projects: ['proj-b'], overrides: [] },
    ]);
  });

  it('scopes a project check to its project, left out or named', () => {
    const { library, home } = layout();
    const { checks } = loadChecks({ library, home });
    expect(checks.find((c) => c.id === 'a-only')?.applies_to).toEqual({ project: ['proj-a'] });
    expect(checks.find((c) => c.id === 'b-own')?.applies_to).toEqual({ project: ['proj-b'] });
  });

  it("refuses a check in a project's folder that names another project, halt rules included", () => {
    const { library, home, projB } = layout();
    const bad = write(
      path.join(projB, '.neatroots', 'checks', 'steal.yaml'),
      [countRule('steal', 1, 'action: halt\napplies_to: { project: [other-team] }\n'), countRule('both', 1, 'applies_to: { project: [proj-b, proj-a] }\n')].join('---\n'),
    );
    // Strict (the CLI): the file's problems, each naming file, check and field.
    expect(() => loadChecks({ library, home })).toThrow(CheckError);
    try {
      loadChecks({ library, home });
    } catch (e) {
      expect(checkProblems(e as CheckError).map((p) => [p.file, p.checkId, p.field])).toEqual([
        [bad, 'steal', 'applies_to.project'],
        [bad, 'both', 'applies_to.project'],
      ]);
    }
    // Lenient (the server): the file is skipped with its problems; nothing applies to other-team.
    const r = loadChecks({ library, home, lenient: true });
    expect(r.errors.flatMap((e) => checkProblems(e).map((p) => p.message))).toEqual([
      expect.stringMatching(/steal\.yaml: check steal: applies_to\.project: a check in project proj-b's folder applies there only/),
      expect.stringMatching(/steal\.yaml: check both: applies_to\.project: /),
    ]);
    expect(r.checks.map((c) => c.id)).not.toContain('steal');
    expect(r.checks.flatMap((c) => c.applies_to?.project ?? [])).not.toContain('other-team');
    expect(r.checks.find((c) => c.id === 'b-own')?.applies_to).toEqual({ project: ['proj-b'] });
  });

  it('adds --checks folders after the projects and can leave out the library', () => {
    const { library, home } = layout();
    const extra = path.join(tmp, 'extra');
    write(path.join(extra, 'x.yaml'), countRule('c1', 9));
    const all = loadChecks({ library, home, dirs: [extra] });
    expect(all.checks.filter((c) => c.id === 'c1').map((c) => [c.source, c.file])).toEqual([['user', path.join(extra, 'x.yaml')]]);
    const noLib = loadChecks({ library: false, home: false, dirs: [extra] });
    expect(noLib.checks.map((c) => c.id)).toEqual(['c1']);
    expect(() => loadChecks({ library: false, home: false, dirs: [path.join(tmp, 'missing')] })).toThrow(/no such folder/);
  });

  it('warns when two files of one source define the same id', () => {
    const home = path.join(tmp, 'home');
    write(path.join(home, 'checks', 'a.yaml'), countRule('dup', 1));
    write(path.join(home, 'checks', 'b.yaml'), countRule('dup', 2));
    const { checks, warnings } = loadChecks({ library: false, home });
    expect(checks.map((c) => c.file)).toEqual([path.join(home, 'checks', 'b.yaml')]);
    expect(warnings).toEqual([`${path.join(home, 'checks', 'b.yaml')}: check dup: replaces the check with the same id in ${path.join(home, 'checks', 'a.yaml')}`]);
  });

  it('throws the CheckError of an invalid file in strict mode', () => {
    const { library, home, projA } = layout();
    const bad = write(path.join(projA, '.neatroots', 'checks', 'bad.yaml'), countRule('broken', 0));
    expect(() => loadChecks({ library, home })).toThrow(CheckError);
    expect(() => loadChecks({ library, home })).toThrow(`${bad}: check broken: rule.at_least: must be an integer >= 1, got 0`);
    expect(() => loadChecks({ library, home, database: [{ id: 'x', yaml: countRule('y', 1) }] })).toThrow(/check broken/);
  });

  it('checks database entries: one check, with the stored id', () => {
    expect(() => loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: countRule('y', 1) }] })).toThrow(
      'database: check x: id: is "y" in the YAML but "x" in the database',
    );
    expect(() => loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: `${countRule('x', 1)}---\n${countRule('z', 1)}` }] })).toThrow(
      'database: check x: must hold exactly one check, found 2',
    );
    expect(() => loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: countRule('x', 1, 'action: halt\n') }] })).toThrow(
      /cannot halt/,
    );
    expect(() => loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: 'kind: rule\n' }] })).toThrow('database: check x: id: is required');
  });

  it('lets a database check halt only when a person saved it (app, cli), never an agent or the planner', () => {
    const halt = countRule('x', 1, 'action: halt\n');
    for (const origin of ['app', 'cli']) {
      expect(loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: halt, origin }] }).checks[0]).toMatchObject({ id: 'x', action: 'halt' });
    }
    for (const origin of ['agent', 'planner', undefined]) {
      expect(() => loadChecks({ library: false, home: false, database: [{ id: 'x', yaml: halt, origin }] })).toThrow('database: check x: action: a library or agent-written check cannot halt');
    }
  });

  it('never lets a database check replace one of your halt rules', () => {
    const home = path.join(tmp, 'home');
    const mine = write(path.join(home, 'checks', 'stop.yaml'), countRule('stop-loop', 5, 'action: halt\n'));
    const { checks, warnings } = loadChecks({ library: false, home, database: [{ id: 'stop-loop', yaml: countRule('stop-loop', 500) }] });
    expect(checks).toEqual([expect.objectContaining({ id: 'stop-loop', source: 'user', action: 'halt', file: mine })]);
    expect(warnings).toEqual([`database: check stop-loop: ignored: it would replace your halt rule in ${mine}`]);
    // A flag rule of yours can be replaced.
    fs.writeFileSync(mine, countRule('stop-loop', 5));
    expect(loadChecks({ library: false, home, database: [{ id: 'stop-loop', yaml: countRule('stop-loop', 500) }] }).checks[0].source).toBe('database');
  });

  it('guards a halt rule only in its own projects: another project\'s database check with the same id stays in effect there', () => {
    const home = path.join(tmp, 'home');
    const projA = path.join(tmp, 'a');
    const haltA = write(path.join(projA, '.neatroots', 'checks', 'x.yaml'), countRule('x', 5, 'action: halt\n'));
    registerProject(home, { name: 'proj-a', path: projA, steering: true });
    const inB = { id: 'x', yaml: countRule('x', 500, 'applies_to: { project: [proj-b] }\n'), origin: 'agent' };
    const { checks, warnings } = loadChecks({ library: false, home, database: [inB] });
    expect(warnings).toEqual([]);
    expect(checks).toEqual([
      expect.objectContaining({ id: 'x', source: 'project', action: 'halt', file: haltA, applies_to: { project: ['proj-a'] } }),
      expect.objectContaining({ id: 'x', source: 'database', action: 'flag', applies_to: { project: ['proj-b'] } }),
    ]);
    // In project A the halt rule still wins over a database check that reaches it.
    const inA = { id: 'x', yaml: countRule('x', 500, 'applies_to: { project: [proj-a, proj-b] }\n'), origin: 'agent' };
    const both = loadChecks({ library: false, home, database: [inA] });
    expect(both.checks).toEqual([expect.objectContaining({ id: 'x', source: 'project', action: 'halt' })]);
    expect(both.warnings).toEqual([`database: check x: ignored: it would replace your halt rule in ${haltA}`]);
  });

  it('in lenient mode collects errors and keeps what a broken file gave last time', () => {
    const { library, home, projA } = layout();
    const first = loadChecks({ library, home, lenient: true });
    expect(first.errors).toEqual([]);
    const file = path.join(projA, '.neatroots', 'checks', 'sub', 'a.yaml');
    fs.writeFileSync(file, 'id: c3\nkind: rule\nrule: { type: count, at_least: [\n');
    write(path.join(home, 'checks', 'new.yaml'), countRule('fresh', 1));
    const next = loadChecks({ library, home, lenient: true, previous: first, database: [{ id: 'd', yaml: 'nonsense: [' }] });
    expect(next.errors.map((e) => e.file)).toEqual([file, 'database']);
    expect(next.errors[0].message).toMatch(/YAML syntax error at \d+:\d+/);
    const ids = next.checks.map((c) => `${c.id}:${c.source}`);
    expect(ids).toEqual(expect.arrayContaining(['a-only:project', 'c3:project', 'fresh:user']));
    expect(next.checks.find((c) => c.id === 'a-only')?.applies_to).toEqual({ project: ['proj-a'] });
    // Without a previous set, the broken file simply gives nothing.
    expect(loadChecks({ library, home, lenient: true }).checks.map((c) => c.id)).not.toContain('a-only');
  });

  it('lists *.yaml and *.yml files recursively in path order, skipping dot folders', () => {
    const d = path.join(tmp, 'list');
    for (const f of ['b.yaml', 'a.yml', 'sub/c.yaml', 'a/z.yaml', 'notes.md', '.hidden/x.yaml', 'C.YAML']) write(path.join(d, f), '');
    expect(listCheckFiles(d).map((f) => path.relative(d, f))).toEqual(['C.YAML', 'a.yml', 'a/z.yaml', 'b.yaml', 'sub/c.yaml']);
  });
});

describe('loadChecks with a CheckParseCache', () => {
  it('gives a check overridden in a project the same narrowed object while it and where it gives way are unchanged', () => {
    const { library, home, files } = layout();
    const cache = new CheckParseCache();
    const userC3 = () => {
      const found = loadChecks({ library, home, cache }).checks.filter((c) => c.id === 'c3' && c.source === 'user');
      expect(found).toHaveLength(1);
      return found[0];
    };
    const first = userC3();
    expect(first.applies_to).toEqual({ not_project: ['proj-a'] });
    // Nothing changed: the same object (so SafeMatching keeps its compiled rule).
    expect(userC3()).toBe(first);
    // The override changed, not where it applies: yours is the same.
    write(files.projA, [countRule('c3', 30), countRule('c4', 3), countRule('a-only', 3)].join('---\n'));
    expect(userC3()).toBe(first);
    // Another project overrides it too: where it applies changed, a new object.
    write(files.projB, [countRule('b-own', 5, 'applies_to: { project: [proj-b] }\n'), countRule('c3', 6)].join('---\n'));
    const second = userC3();
    expect(second).not.toBe(first);
    expect(second.applies_to).toEqual({ not_project: ['proj-a', 'proj-b'] });
    expect(userC3()).toBe(second);
    // Yours changed: a new object, narrowed as before, with the new rule.
    write(files.user, [countRule('c2', 2), countRule('c3', 7), countRule('c4', 2)].join('---\n'));
    const third = userC3();
    expect(third).not.toBe(second);
    expect([third.applies_to, (third as { rule: { at_least: number } }).rule.at_least]).toEqual([{ not_project: ['proj-a', 'proj-b'] }, 7]);
  });
});

describe('project registry', () => {
  it('registers, replaces by name or folder, and reads back', () => {
    const home = path.join(tmp, 'home');
    expect(readProjects(home)).toEqual([]);
    registerProject(home, { name: 'shop', path: path.join(tmp, 'shop'), steering: false });
    registerProject(home, { name: 'blog', path: path.join(tmp, 'blog'), steering: true });
    registerProject(home, { name: 'shop', path: path.join(tmp, 'shop'), steering: true });
    registerProject(home, { name: 'journal', path: path.join(tmp, 'blog'), steering: false });
    expect(readProjects(home)).toEqual([
      { name: 'journal', path: path.join(tmp, 'blog'), steering: false },
      { name: 'shop', path: path.join(tmp, 'shop'), steering: true },
    ]);
    expect(JSON.parse(fs.readFileSync(path.join(home, 'projects.json'), 'utf8'))).toHaveLength(2);
  });

  it('keeps steering as it was when registering again without saying', () => {
    const home = path.join(tmp, 'home');
    registerProject(home, { name: 'shop', path: path.join(tmp, 'shop'), steering: true });
    registerProject(home, { name: 'shop', path: path.join(tmp, 'shop') });
    expect(readProjects(home)).toEqual([{ name: 'shop', path: path.join(tmp, 'shop'), steering: true }]);
    // Renamed in the same folder: still the same project, still steering.
    registerProject(home, { name: 'store', path: path.join(tmp, 'shop') });
    expect(readProjects(home)).toEqual([{ name: 'store', path: path.join(tmp, 'shop'), steering: true }]);
    registerProject(home, { name: 'store', path: path.join(tmp, 'shop'), steering: false });
    registerProject(home, { name: 'new', path: path.join(tmp, 'new') });
    expect(readProjects(home).map((p) => [p.name, p.steering])).toEqual([['new', false], ['store', false]]);
  });

  it('reports a broken projects.json', () => {
    write(path.join(tmp, 'projects.json'), '{');
    expect(() => readProjects(tmp)).toThrow(/projects\.json: invalid JSON/);
    write(path.join(tmp, 'projects.json'), '[{"name":"x"}]');
    expect(() => readProjects(tmp)).toThrow(/project x: path must be a non-empty string/);
  });

  it('finds home from NEATROOTS_HOME or ~/.neatroots', () => {
    expect(neatrootsHome({ NEATROOTS_HOME: '/srv/nr' })).toBe('/srv/nr');
    expect(neatrootsHome({})).toBe(path.join(os.homedir(), '.neatroots'));
  });
});

describe('the shipped library', () => {
  const library = defaultLibraryDir();

  it('is found from the sources and from the build folder', () => {
    expect(library).toBe(path.resolve(__dirname, '../../../packages/neatroots/library'));
    expect(defaultLibraryDir(path.resolve(__dirname, '../dist'))).toBe(library);
    const installed = path.join(tmp, 'app', 'node_modules', 'neatroots');
    write(path.join(installed, 'package.json'), '{"name":"neatroots"}');
    fs.mkdirSync(path.join(installed, 'library'));
    expect(defaultLibraryDir(path.join(tmp, 'app', 'node_modules', '@neatroots', 'checks', 'dist'))).toBe(path.join(installed, 'library'));
  });

  const loaded = loadChecks({ library, home: false });

  it('loads cleanly: rule checks and questions that only flag, with guidance', () => {
    expect(loaded.warnings).toEqual([]);
    expect(loaded.checks.filter(isRuleCheck).map((c) => c.id).sort()).toEqual([
      'credential-in-tool-call', 'no-answer', 'repeated-tool-call', 'run-failed', 'runaway-loop', 'slow-tool-call',
      'token-budget', 'tool-error-streak', 'unrecovered-tool-error',
    ]);
    // The question library (library/questions/, docs/questions.md).
    expect(loaded.checks.filter((c) => !isRuleCheck(c)).map((c) => c.id).sort()).toEqual([
      'contradicts-tools', 'ignored-tool-error', 'instructions-in-tool-content', 'personal-data-in-answer',
      'repeating-without-progress', 'system-prompt-violation', 'unfinished-task', 'wrong-tool-or-arguments',
    ]);
    for (const c of loaded.checks) {
      expect(c.action).toBe('flag');
      expect(c.guidance).toMatch(/\byou/i);
    }
    const group = (id: string) => loaded.checks.find((c) => c.id === id)?.group;
    expect(['repeated-tool-call', 'tool-error-streak', 'runaway-loop'].map(group)).toEqual(['loop', 'loop', 'loop']);
    expect(['run-failed', 'no-answer'].map(group)).toEqual(['ending', 'ending']);
    expect(group('unrecovered-tool-error')).toBe('tool-result');
    const loop = loaded.checks.filter((c) => c.group === 'loop').sort((a, b) => (b.priority ?? 0) - (a.priority ?? 0));
    expect(loop[0].id).toBe('repeated-tool-call');
  });

  it.each(loaded.checks.map((c) => c.id))('%s has examples that fire and a near miss', (id) => {
    const dir = path.join(library, 'examples', id);
    const fires = parseJsonl(fs.readFileSync(path.join(dir, 'fires.jsonl'), 'utf8'), 'fires.jsonl');
    const quiet = parseJsonl(fs.readFileSync(path.join(dir, 'quiet.jsonl'), 'utf8'), 'quiet.jsonl');
    const expected = fs.readFileSync(path.join(dir, 'expected.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(expected.length).toBeGreaterThan(0);
    const runs = (items: typeof fires) => new Set(items.map((i) => (i.kind === 'span' ? i.span.run_id : i.run.run_id)));
    for (const e of expected) {
      expect(Object.keys(e)).toEqual(['check_id', 'run_id', 'state', 'count']);
      expect(e.check_id).toBe(id);
      expect(runs(fires).has(e.run_id)).toBe(true);
      expect(['open', 'resolved']).toContain(e.state);
      expect(Number.isInteger(e.count) && e.count >= 1).toBe(true);
    }
    for (const items of [fires, quiet]) {
      for (const run of runs(items)) {
        const mine = items.filter((i) => (i.kind === 'span' ? i.span.run_id : i.run.run_id) === run);
        expect(mine[0].kind).toBe('run_start');
        expect(mine[mine.length - 1].kind).toBe('run_end');
      }
    }
    // The near miss is a different run, so its findings could not be confused with the firing one.
    for (const r of runs(quiet)) expect(runs(fires).has(r)).toBe(false);
  });

  it('has an example folder only for checks that exist', () => {
    expect(fs.readdirSync(path.join(library, 'examples')).sort()).toEqual(loaded.checks.map((c) => c.id).sort());
  });
});
