import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { defaultLogFormat, DRIVER_VARIABLES } from '@neatroots/platform';
import { main, type Io } from './cli';
import { modulesOf } from './compose';
import { TARGETS } from './serve';

/** Runs the CLI in-process with captured output. */
async function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; out: string[]; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env, cwd };
  const code = await main(args, io);
  return { code, out, err: err.join('\n') };
}

describe('neatroots CLI', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-cli-'));
    env = { NEATROOTS_HOME: path.join(dir, 'home') };
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const write = (rel: string, text: string) => {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, text);
    return p;
  };
  const jsonl = (items: object[]) => items.map((i) => JSON.stringify(i)).join('\n') + '\n';
  const search = (run: string, id: string, t: number, q = 'x') => ({
    run_id: run, span_id: id, type: 'tool', tool: 'search', input: { q }, start_ms: t, end_ms: t + 5,
  });

  describe('replay', () => {
    it('prints finding events as JSON Lines, in the order they happen, in the contract shape', async () => {
      const spans = write('runs.jsonl', jsonl([search('r1', 's1', 1000), search('r1', 's2', 1010), search('r1', 's3', 1020), search('r1', 's4', 1030, 'y')]));
      const r = await run(['replay', '--no-library', '--checks', 'checks', 'runs.jsonl'], env, dir);
      // no checks folder yet: exit 2, and the reason names it
      expect(r.code).toBe(2);
      expect(r.err).toContain('checks');
      write(
        'checks/rep.yaml',
        `id: rep\nkind: rule\ntitle: Repeated search\nrule: { type: repeat, span: { tool: search }, same: [tool, input], at_least: 3 }\nguidance: '{tool} x{count}'\n`,
      );
      const ok = await run(['replay', '--no-library', '--checks', 'checks', spans], env, dir);
      expect(ok.code).toBe(0);
      const lines = ok.out.map((l) => JSON.parse(l));
      expect(lines.map((l) => l.status)).toEqual(['raised', 'resolved']);
      expect(Object.keys(lines[0]).slice(0, 9)).toEqual(['check_id', 'run_id', 'status', 'span_ids', 'count', 'action', 'title', 'guidance', 'at_ms']);
      expect(lines[0]).toMatchObject({ check_id: 'rep', run_id: 'r1', span_ids: ['s1', 's2', 's3'], count: 3, action: 'flag', guidance: 'search x3', at_ms: 1025 });
    });

    it('--summary prints one line per check and run with its final state', async () => {
      write('checks/rep.yaml', `id: rep\nkind: rule\ntitle: t\nrule: { type: repeat, span: { tool: search }, same: [tool], at_least: 2 }\n`);
      const a = write('a.jsonl', jsonl([search('r1', 's1', 1), search('r1', 's2', 2), search('r2', 's1', 3)]));
      const b = write('b.jsonl', jsonl([search('r2', 's2', 4), { run_id: 'r2', span_id: 'l', type: 'llm' }, { run_id: 'r2', span_id: 'x', type: 'tool', tool: 'other' }]));
      const r = await run(['replay', '--no-library', '--checks', 'checks', '--summary', a, b], env, dir);
      expect(r.code).toBe(0);
      // r2's streak continues across the two files (lines as they arrive, file after file), then ends.
      expect(r.out.map((l) => JSON.parse(l))).toEqual([
        { check_id: 'rep', run_id: 'r1', state: 'open', count: 2 },
        { check_id: 'rep', run_id: 'r2', state: 'open', count: 2 },
      ]);
    });

    it('runs the shipped library by default', async () => {
      const f = write('loop.jsonl', jsonl([search('r', 'a', 1), search('r', 'b', 2), search('r', 'c', 3)]));
      const r = await run(['replay', '--summary', f], env, dir);
      expect(r.out.map((l) => JSON.parse(l).check_id)).toContain('repeated-tool-call');
      const none = await run(['replay', '--summary', '--no-library', f], env, dir);
      expect(none.out).toEqual([]);
    });

    it('exits 2 with the file and line for malformed input', async () => {
      const f = write('bad.jsonl', `${JSON.stringify(search('r', 'a', 1))}\n{"run_id":"r","type":"tool"}\n`);
      const r = await run(['replay', '--no-library', f], env, dir);
      expect(r.code).toBe(2);
      expect(r.err).toContain('bad.jsonl:2');
      expect(r.err).toContain('span_id');
      const broken = write('broken.jsonl', '{not json\n');
      expect((await run(['replay', broken], env, dir)).err).toMatch(/broken\.jsonl:1: invalid JSON/);
      expect((await run(['replay', 'missing.jsonl'], env, dir)).code).toBe(2);
      fs.mkdirSync(path.join(dir, 'spans-folder'));
      expect(await run(['replay', 'spans-folder'], env, dir)).toMatchObject({ code: 2, err: expect.stringContaining('spans-folder: a folder, not a file of spans') });
    });

    it('holds each line to the NEATROOTS_MAX_* limits of the environment, as ingest does, but not to the clock', async () => {
      const deep = { ...search('r', 'a', 1), input: { a: { b: { c: { d: 1 } } } } };
      const tokens = { ...search('r', 'b', 2), type: 'llm', usage: { input_tokens: 500 } };
      const f = write('limits.jsonl', jsonl([deep]));
      const g = write('tokens.jsonl', jsonl([tokens]));
      // the defaults take both
      expect((await run(['replay', '--no-library', f, g], env, dir)).code).toBe(0);
      const depth = await run(['replay', '--no-library', f], { ...env, NEATROOTS_MAX_JSON_DEPTH: '2' }, dir);
      expect(depth).toMatchObject({ code: 2, err: `neatroots replay: ${f}:1: input: is JSON nested more than 2 levels deep (NEATROOTS_MAX_JSON_DEPTH)` });
      const many = await run(['replay', '--no-library', g], { ...env, NEATROOTS_MAX_TOKENS: '10' }, dir);
      expect(many.code).toBe(2);
      expect(many.err).toBe(`neatroots replay: ${g}:1: usage.input_tokens: is 500, more than 10 tokens (NEATROOTS_MAX_TOKENS)`);
      // a recorded time is never held to this machine's clock, whatever NEATROOTS_MAX_FUTURE_MS says
      const future = write('future.jsonl', jsonl([search('r', 'c', Date.UTC(2400, 0, 1))]));
      expect((await run(['replay', '--no-library', future], { ...env, NEATROOTS_MAX_FUTURE_MS: '0' }, dir)).code).toBe(0);
      // a bad setting is said as the CLI says bad settings
      const bad = await run(['replay', '--no-library', f], { ...env, NEATROOTS_MAX_JSON_DEPTH: '1' }, dir);
      expect(bad.code).toBe(2);
      expect(bad.err).toMatch(/^neatroots replay: invalid configuration:\n {2}NEATROOTS_MAX_JSON_DEPTH: /);
    });

    it('exits 2 for invalid checks: invalid YAML with its position, an unknown rule type', async () => {
      const f = write('ok.jsonl', jsonl([search('r', 'a', 1)]));
      write('bad1/x.yaml', 'id: x\nkind: rule\nrule: [unclosed\n');
      const yamlErr = await run(['replay', '--checks', 'bad1', f], env, dir);
      expect(yamlErr.code).toBe(2);
      expect(yamlErr.err).toMatch(/x\.yaml/);
      write('bad2/y.yaml', 'id: y\nkind: rule\ntitle: t\nrule: { type: repeet, span: {}, at_least: 2 }\n');
      const typeErr = await run(['replay', '--checks', 'bad2', f], env, dir);
      expect(typeErr.code).toBe(2);
      expect(typeErr.err).toMatch(/y\.yaml: check y: rule\.type/);
    });
  });

  describe('init, checks list, checks validate', () => {
    it('registers a project whose checks then apply to it, and lists what overrides what', async () => {
      const proj = path.join(dir, 'shop');
      fs.mkdirSync(proj);
      const r = await run(['init', proj, '--name', 'shop', '--steering'], env, dir);
      expect(r.code).toBe(0);
      expect(fs.existsSync(path.join(proj, '.neatroots', 'checks', 'example.yaml'))).toBe(true);
      write('shop/.neatroots/checks/loop.yaml', 'id: repeated-tool-call\nkind: rule\ntitle: mine\nrule: { type: count, span: {}, at_least: 1 }\naction: halt\n');
      const list = await run(['checks', 'list', '--json'], env, dir);
      expect(list.code).toBe(0);
      const entries: { id: string; source: string }[] = JSON.parse(list.out.join('\n')).checks;
      const mine = entries.find((e) => e.id === 'repeated-tool-call' && e.source === 'project');
      expect(mine).toMatchObject({ projects: ['shop'], overrides: [{ source: 'library' }] });
      // elsewhere the library's version stays in effect
      expect(entries.find((e) => e.id === 'repeated-tool-call' && e.source === 'library')).toMatchObject({ except_projects: ['shop'] });
      const text = await run(['checks', 'list'], env, dir);
      expect(text.out.join('\n')).toContain('shop (steering on)');
    });

    it('init again keeps steering unless --steering or --no-steering is given', async () => {
      const proj = path.join(dir, 'shop');
      fs.mkdirSync(proj);
      const steering = () => JSON.parse(fs.readFileSync(path.join(dir, 'home', 'projects.json'), 'utf8')).find((x: { name: string }) => x.name === 'shop').steering;
      expect((await run(['init', proj, '--name', 'shop'], env, dir)).out[0]).toMatch(/steering off/);
      expect(steering()).toBe(false);
      await run(['init', proj, '--name', 'shop', '--steering'], env, dir);
      expect(steering()).toBe(true);
      const again = await run(['init', proj, '--name', 'shop'], env, dir);
      expect(again.code).toBe(0);
      expect(again.out[0]).toMatch(/steering on/);
      expect(steering()).toBe(true);
      await run(['init', proj, '--no-steering'], env, dir); // by folder: the name defaults to "shop" too
      expect(steering()).toBe(false);
      const both = await run(['init', proj, '--steering', '--no-steering'], env, dir);
      expect(both.code).toBe(2);
      expect(steering()).toBe(false);
    });

    it('init says when it moves a project name to another folder, or renames a folder\'s project, and when steering carries over', async () => {
      for (const d of ['p1', 'p3']) fs.mkdirSync(path.join(dir, d));
      expect((await run(['init', 'p1', '--name', 'shop', '--steering'], env, dir)).out).toHaveLength(2);
      const moved = await run(['init', 'p3', '--name', 'shop'], env, dir);
      expect(moved.code).toBe(0);
      expect(moved.out).toEqual([
        `registered project shop: checks in ${path.join(dir, 'p3', '.neatroots', 'checks')} (steering on: halt rules act)`,
        `replaces project shop's folder ${path.join(dir, 'p1')}: its checks there no longer load`,
        'steering on carries over from it (--no-steering to turn it off)',
        `registry: ${path.join(dir, 'home', 'projects.json')}`,
      ]);
      // Given, steering does not carry over and is not said to.
      const given = await run(['init', 'p1', '--name', 'shop', '--no-steering'], env, dir);
      expect(given.out.slice(1, -1)).toEqual([`replaces project shop's folder ${path.join(dir, 'p3')}: its checks there no longer load`]);
      // The same folder under another name: renamed, said.
      const renamed = await run(['init', 'p1', '--name', 'store'], env, dir);
      expect(renamed.out.slice(1, -1)).toEqual(['replaces project shop in this folder: its checks now apply to store']);
      // Registering again as it is says nothing more.
      expect((await run(['init', 'p1', '--name', 'store'], env, dir)).out).toHaveLength(2);
    });

    it('checks validate refuses the options of checks list (exit 2) instead of ignoring them, and validates --checks folders alongside PATHs', async () => {
      const rule = (id: string) => `id: ${id}\nkind: rule\ntitle: ${id}\nrule: { type: repeat, span: { tool: search }, same: [tool], at_least: 2 }\n`;
      write('refund.yaml', rule('refund'));
      write('cdir/broken.yaml', 'id: broken\nkind: rule\ntitle: Broken\n');
      for (const flag of ['--json', '--no-library', '--no-demo']) {
        const r = await run(['checks', 'validate', flag, 'refund.yaml'], env, dir);
        expect([flag, r.code, r.out]).toEqual([flag, 2, []]);
        expect(r.err).toMatch(new RegExp(`^neatroots checks: checks validate has no option ${flag} \\(its options: --checks\\)\nUsage: neatroots checks validate \\[--checks DIR\\]\\.\\.\\. \\[PATH\\.\\.\\.\\]`));
      }
      // cdir's invalid file is found beside refund.yaml, not left out.
      const both = await run(['checks', 'validate', '--checks', 'cdir', 'refund.yaml'], env, dir);
      expect(both.code).toBe(2);
      expect(both.err).toContain(`${path.join(dir, 'cdir', 'broken.yaml')}: check broken: rule: is required for a rule check`);
      expect(both.out).toEqual(['1 problem found']);
      write('cdir/broken.yaml', rule('mended'));
      expect(await run(['checks', 'validate', '--checks', 'cdir', 'refund.yaml'], env, dir)).toEqual({ code: 0, out: ['2 checks valid'], err: '' });
      // list still takes its own.
      expect((await run(['checks', 'list', '--json', '--no-library', '--no-demo', '--checks', 'cdir'], env, dir)).code).toBe(0);
    });

    it('checks --help says what checks validate takes, and that checks list shows no checks of a database', async () => {
      const help = (await run(['checks', '--help'], env, dir)).out.join('\n');
      expect(help).toContain('neatroots checks validate [--checks DIR]... [PATH...]');
      expect(help).toContain('each --checks folder is validated too');
      expect(help).not.toMatch(/source \(library, user,\s+project, database\)/);
      expect(help).toMatch(/Checks saved in a server's database are not\s+read here: the app's Checks page and GET \/v1\/projects\/\{project\}\/checks list those/);
    });

    it('checks list shows each check\'s action and the projects\' own checks, the demo\'s halt rule included', async () => {
      write('mine/halt.yaml', 'id: stop-loops\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 9 }\naction: halt\n');
      const text = await run(['checks', 'list', '--checks', 'mine'], env, dir);
      expect(text.code).toBe(0);
      const line = (id: string) => text.out.find((l) => l.startsWith(`${id}  `)) ?? '';
      expect(line('stop-loops')).toMatch(/^stop-loops {2}rule {2}halt {2}user /);
      expect(line('repeated-tool-call')).toMatch(/^repeated-tool-call {2}rule {2}flag {2}library /);
      expect(line('refund-without-lookup')).toMatch(/^refund-without-lookup {2}rule {2}halt {2}project .*\[projects: demo\]$/);
      expect(text.out.join('\n')).toContain('demo (steering on)');

      const json = await run(['checks', 'list', '--json', '--checks', 'mine'], env, dir);
      const doc = JSON.parse(json.out.join('\n')); // one document, not one per line
      expect(doc.checks.find((c: { id: string }) => c.id === 'refund-without-lookup')).toMatchObject({
        kind: 'rule', action: 'halt', source: 'project', projects: ['demo'],
      });
      expect(doc.checks.find((c: { id: string }) => c.id === 'stop-loops')).toMatchObject({ action: 'halt', source: 'user' });
      expect(doc.projects).toEqual([expect.objectContaining({ name: 'demo', steering: true })]);

      const noDemo = await run(['checks', 'list', '--json', '--no-demo'], env, dir);
      expect(JSON.parse(noDemo.out.join('\n')).checks.map((c: { id: string }) => c.id)).not.toContain('refund-without-lookup');
    });

    it('checks list leaves out a file that does not validate, as start does: its problems on stderr, the rest listed, exit 2', async () => {
      write('mine/good.yaml', 'id: good-one\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 2 }\n');
      const bad = write('mine/bad.yaml', 'id: bad-one\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 0 }\n');
      const text = await run(['checks', 'list', '--no-demo', '--checks', 'mine'], env, dir);
      expect(text.code).toBe(2);
      expect(text.err).toBe(`${bad}: check bad-one: rule.at_least: must be an integer >= 1, got 0`);
      expect(text.out.find((l) => l.startsWith('good-one  '))).toMatch(/^good-one {2}rule {2}flag {2}user /);
      expect(text.out.find((l) => l.startsWith('repeated-tool-call  '))).toBeDefined();
      expect(text.out.join('\n')).not.toContain('bad-one');

      const json = await run(['checks', 'list', '--json', '--no-demo', '--checks', 'mine'], env, dir);
      expect(json.code).toBe(2);
      const doc = JSON.parse(json.out.join('\n'));
      expect(doc.checks.map((c: { id: string }) => c.id)).toContain('good-one');
      expect(doc.errors).toEqual([{ file: bad, check_id: 'bad-one', field: 'rule.at_least', reason: 'must be an integer >= 1, got 0' }]);
    });

    it('checks list refuses, as start does, a project check that names another project', async () => {
      const proj = path.join(dir, 'p1');
      fs.mkdirSync(proj);
      expect((await run(['init', proj], env, dir)).code).toBe(0);
      write('p1/.neatroots/checks/halt.yaml', 'id: other-halt\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 2 }\naction: halt\napplies_to: { project: [other-team] }\n');
      const r = await run(['checks', 'list', '--no-demo'], env, dir);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/halt\.yaml: check other-halt: applies_to\.project: a check in project p1's folder applies there only/);
      expect(r.out.join('\n')).not.toContain('other-team');
      expect(r.out.find((l) => l.startsWith('example-repeated-search  '))).toMatch(/\[projects: p1\]$/);
    });

    it('validate reports all of a check\'s problems in one run', async () => {
      // Four mistakes: an unknown key, a bad action, a bad `same` field and a zero at_least.
      write('c/four.yaml', 'id: four\nkind: rule\nseverity: high\naction: stop\nrule: { type: repeat, same: [args], at_least: 0 }\n');
      const r = await run(['checks', 'validate', 'c'], env, dir);
      expect(r.code).toBe(2);
      expect(r.err.split('\n').filter((l) => l.includes('four.yaml: check four:'))).toEqual([
        expect.stringContaining(': severity: unknown key'),
        expect.stringContaining(': action: must be flag or halt'),
        expect.stringContaining(': rule.same: "args" is not one of'),
        expect.stringContaining(': rule.at_least: must be an integer >= 1'),
      ]);
      expect(r.out).toEqual(['4 problems found']);
    });

    it('validate reports every problem with file, check id and field, and exits 2', async () => {
      write('c/a.yaml', 'id: a\nkind: rule\ntitle: t\nrule: { type: match, span: {}, pattern: "(a+)+" }\n');
      write('c/b.yaml', 'id: b\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 0 }\n');
      write('c/ok.yaml', 'id: ok\nkind: rule\ntitle: t\nrule: { type: count, span: {}, at_least: 2 }\n');
      const r = await run(['checks', 'validate', 'c'], env, dir);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/a\.yaml: check a: rule\.pattern/);
      expect(r.err).toMatch(/b\.yaml: check b: rule\.at_least/);
      expect(r.out).toEqual(['2 problems found']);
      fs.rmSync(path.join(dir, 'c', 'a.yaml'));
      fs.rmSync(path.join(dir, 'c', 'b.yaml'));
      expect((await run(['checks', 'validate', 'c'], env, dir)).code).toBe(0);
    });
  });

  describe('a broken projects.json', () => {
    const registry = () => path.join(dir, 'home', 'projects.json');
    beforeEach(() => write('home/projects.json', '{bad'));

    it('checks list, checks validate and replay say so, naming the file, and exit 2', async () => {
      const said = new RegExp(`^neatroots checks: ${registry()}: invalid JSON \\(`);
      for (const args of [['checks', 'list'], ['checks', 'list', '--json', '--no-demo']]) {
        const r = await run(args, env, dir);
        expect([args, r.code]).toEqual([args, 2]);
        expect(r.err).toMatch(said);
        expect(r.err).not.toMatch(/\n\s+at /);
      }
      const validate = await run(['checks', 'validate'], env, dir);
      expect(validate).toMatchObject({ code: 2, out: ['1 problem found'] });
      expect(validate.err).toMatch(new RegExp(`^${registry()}: invalid JSON \\(`));
      const f = write('ok.jsonl', jsonl([search('r', 'a', 1)]));
      const replay = await run(['replay', f], env, dir);
      expect(replay.code).toBe(2);
      expect(replay.err).toMatch(new RegExp(`^neatroots replay: ${registry()}: invalid JSON \\(`));
    });

    it('init says how to repair it, leaves it as it was, and registers once it is moved aside', async () => {
      const proj = path.join(dir, 'shop');
      fs.mkdirSync(proj);
      const r = await run(['init', proj], env, dir);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(new RegExp(`^neatroots init: ${registry()}: invalid JSON \\(`));
      expect(r.err).toContain(`mv ${registry()} ${registry()}.broken`);
      expect(r.err).not.toMatch(/\n\s+at /);
      expect(fs.readFileSync(registry(), 'utf8')).toBe('{bad');
      expect(fs.existsSync(path.join(proj, '.neatroots'))).toBe(false); // nothing written
      fs.renameSync(registry(), `${registry()}.broken`);
      expect((await run(['init', proj], env, dir)).code).toBe(0);
      expect(JSON.parse(fs.readFileSync(registry(), 'utf8'))).toEqual([expect.objectContaining({ name: 'shop' })]);
    });

    it('one that is not a list of projects is said alike', async () => {
      write('home/projects.json', '[{"name":"x"}]');
      const r = await run(['checks', 'list'], env, dir);
      expect(r).toMatchObject({ code: 2, err: `neatroots checks: ${registry()}: project x: path must be a non-empty string` });
    });
  });

  describe('a path through a file', () => {
    it('init says .neatroots/checks exists and is not a folder, writes nothing, and exits 2', async () => {
      const checks = write('p2/.neatroots/checks', '');
      const r = await run(['init', path.join(dir, 'p2')], env, dir);
      expect(r).toMatchObject({ code: 2, err: `neatroots init: ${checks} exists and is not a folder` });
      expect(fs.existsSync(path.join(dir, 'home', 'projects.json'))).toBe(false);
      const dotdir = write('p3/.neatroots', '');
      const r3 = await run(['init', 'p3'], env, dir);
      expect(r3).toMatchObject({ code: 2, err: `neatroots init: ${dotdir} exists and is not a folder` });
    });

    it('checks save and preview of FILE under a file exit 2 naming it, without a stack trace', async () => {
      write('c2/empty.yaml', '');
      for (const sub of ['save', 'preview']) {
        const r = await run(['checks', sub, 'c2/empty.yaml/x', '--key', 'k', '--project', 'p', '--url', 'http://127.0.0.1:9'], env, dir);
        expect([sub, r.code]).toEqual([sub, 2]);
        expect(r.err).toMatch(/^neatroots checks: ENOTDIR: .*c2\/empty\.yaml\/x/);
        expect(r.err).not.toMatch(/\n\s+at /);
      }
    });
  });

  describe('checks save and preview', () => {
    it('exit 2 for a FILE that is a folder, saying so, as for a missing one', async () => {
      fs.mkdirSync(path.join(dir, 'a-folder'));
      for (const sub of ['save', 'preview']) {
        const folder = await run(['checks', sub, 'a-folder', '--key', 'k', '--project', 'p', '--url', 'http://127.0.0.1:9'], env, dir);
        expect([sub, folder.code]).toEqual([sub, 2]);
        expect(folder.err).toBe('neatroots checks: a-folder: a folder, not a check file');
        const missing = await run(['checks', sub, 'nope.yaml', '--key', 'k', '--project', 'p', '--url', 'http://127.0.0.1:9'], env, dir);
        expect([sub, missing.code]).toEqual([sub, 2]);
      }
    });
  });

  it('start --help says what start runs on by default: the bus log, journaled windows, $NEATROOTS_HOME/data', async () => {
    const help = (await run(['start', '--help'], env, dir)).out.join('\n');
    expect(help).not.toMatch(/in-memory run windows|default ~\/\.neatroots\/data/);
    expect(help).toContain('journaled run windows');
    expect(help).toContain('default $NEATROOTS_HOME/data');
  });

  it('serve --help says what serve needs and does: Redis for review too, logs pretty on a terminal else JSON, SIGHUP stops it too', async () => {
    const help = (await run(['serve', '--help'], env, dir)).out.join('\n').replace(/\s+/g, ' ');
    // Every service whose module asks for Redis (run windows, jobs) is named, review included.
    const names: Record<string, string> = { 'rule-engine': 'rule engine', question: 'question', review: 'review' };
    const redis = modulesOf(TARGETS.filter((t): t is Exclude<typeof t, 'all'> => t !== 'all'))
      .filter((m) => m.needs.some((n) => DRIVER_VARIABLES[n as keyof typeof DRIVER_VARIABLES] === 'NEATROOTS_REDIS_URL'))
      .map((m) => m.name);
    expect(redis).toEqual(['rule-engine', 'question', 'review']);
    expect(help).toContain('Redis (NEATROOTS_REDIS_URL) for the rule engine, question and review (its jobs)');
    for (const m of redis) expect(help.slice(help.indexOf('Redis'), help.indexOf('Postgres'))).toContain(names[m]);
    // The log format: pretty when standard error is a terminal, JSON otherwise.
    expect([defaultLogFormat({ isTTY: true }), defaultLogFormat({ isTTY: false })]).toEqual(['pretty', 'json']);
    expect(help).not.toContain('Logs are JSON lines');
    expect(help).toContain('Logs go to standard error: readable (pretty) when it is a terminal, else JSON lines');
    expect(help).toContain('SIGTERM, SIGINT or SIGHUP stops it gracefully');
  });

  it('prints its version with --version', async () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
    for (const flag of ['--version', '-V']) {
      const r = await run([flag], env, dir);
      expect(r).toMatchObject({ code: 0, out: [pkg.version] });
    }
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('an empty value for a flag that takes one is a usage error (exit 2), not the flag left out', async () => {
    for (const args of [['checks', 'draft', 'refunds without lookup', '--workflow', ''], ['checks', 'draft', 'x', '--workflow='], ['init', '--name', ''], ['replay', '--checks', '', 'x.jsonl']]) {
      const r = await run([...args, '--key', 'k', '--project', 'p', '--url', 'http://127.0.0.1:9'].slice(0, args[0] === 'checks' ? undefined : args.length), env, dir);
      expect([args, r.code]).toEqual([args, 2]);
      expect(r.err).toMatch(/: --(workflow|name|checks) needs a value, got an empty one\nUsage: /);
    }
    expect(fs.existsSync(path.join(dir, 'home', 'projects.json'))).toBe(false);
  });

  it('an option where a value should be is a usage error (exit 2), not taken as the value: init registers nothing', async () => {
    const r = await run(['init', '--name', '--steering'], env, dir);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^neatroots init: --name needs a value, got the option --steering; write --name=--steering if you mean it\nUsage: /);
    expect(r.out).toEqual([]);
    expect(fs.existsSync(path.join(dir, 'home', 'projects.json'))).toBe(false);
  });

  it('a flag given twice is a usage error (exit 2) naming it, not the last one kept; a repeatable one collects', async () => {
    for (const args of [['init', '--name', 'a', '--name', 'b'], ['init', '--steering', '--steering'], ['checks', 'preview', 'x', '--runs', '5', '--runs', '7', '--key', 'k', '--url', 'http://127.0.0.1:9']]) {
      const r = await run(args, env, dir);
      expect([args, r.code]).toEqual([args, 2]);
      expect(r.err).toMatch(new RegExp(`^neatroots (init|checks): --(name|steering|runs) given twice: give it once\nUsage: `));
    }
    expect(fs.existsSync(path.join(dir, 'home', 'projects.json'))).toBe(false);
    const spans = write('s.jsonl', jsonl([search('r', 'a', 1)]));
    write('c1/a.yaml', 'id: a\nkind: rule\ntitle: A\nrule: { type: repeat, span: { tool: search }, same: [tool], at_least: 2 }\n');
    write('c2/b.yaml', 'id: b\nkind: rule\ntitle: B\nrule: { type: repeat, span: { tool: search }, same: [tool], at_least: 2 }\n');
    const both = await run(['checks', 'list', '--json', '--no-library', '--no-demo', '--checks', 'c1', '--checks', 'c2'], env, dir);
    expect(JSON.parse(both.out.join('\n')).checks.map((c: { id: string }) => c.id)).toEqual(['a', 'b']);
    expect((await run(['replay', '--no-library', '--checks', 'c1', '--checks', 'c2', spans], env, dir)).code).toBe(0);
  });

  it('start, serve and checks list refuse arguments they do not take (exit 2) instead of ignoring them', async () => {
    // A bad port: were the argument ignored, start and serve would stop at the setting instead.
    const bad = { ...env, NEATROOTS_HTTP_PORT: 'not-a-port' };
    for (const [args, said] of [
      [['start', 'no-demo'], 'neatroots start: start takes no arguments, got no-demo'],
      [['serve', '--target', 'api', 'extra'], 'neatroots serve: serve takes no arguments, got extra'],
      [['checks', 'list', '--no-demo', 'mine'], 'neatroots checks: checks list takes no arguments, got mine'],
    ] as const) {
      const r = await run([...args], bad, dir);
      expect([args, r.code]).toEqual([args, 2]);
      expect(r.err.split('\n')[0]).toMatch(new RegExp(`^${said}`));
      expect(r.out).toEqual([]);
    }
  });

  it('with no command, the help goes to standard error with exit 2; asked for (--help, help), to standard output with exit 0', async () => {
    const none = await run([], env, dir);
    expect([none.code, none.out]).toEqual([2, []]);
    expect(none.err).toMatch(/^neatroots: live checks for fleets of AI agents\n\nUsage: neatroots <command> \[options\]/);
    for (const ask of [['--help'], ['-h'], ['help']]) expect(await run(ask, env, dir)).toEqual({ code: 0, out: [none.err], err: '' });
  });

  it('help COMMAND prints that command\'s help, and checks help the checks help, as --help does', async () => {
    for (const [asked, same] of [
      [['help', 'replay'], ['replay', '--help']],
      [['help', 'init'], ['init', '--help']],
      [['help', 'checks'], ['checks', '--help']],
      [['checks', 'help'], ['checks', '--help']],
      [['help', 'checks', 'draft'], ['checks', 'draft', '--help']],
      [['checks', 'help', 'preview'], ['checks', 'preview', '--help']],
    ]) {
      const r = await run(asked, env, dir);
      expect([asked, r.code]).toEqual([asked, 0]);
      expect(r.out[0]).toMatch(new RegExp(`^Usage: neatroots ${same.slice(0, -1).join(' ')}`));
      expect(r).toEqual(await run(same, env, dir));
    }
    const nope = await run(['help', 'nope'], env, dir);
    expect([nope.code, nope.out]).toEqual([2, []]);
    expect(nope.err).toMatch(/^neatroots: unknown command "nope"/);
  });

  it('has --help on every command and exits 2 on a usage error', async () => {
    for (const cmd of ['replay', 'init', 'checks', 'start']) {
      const r = await run([cmd, '--help'], env, dir);
      expect([cmd, r.code]).toEqual([cmd, 0]);
      expect(r.out.join('\n')).toMatch(/^Usage: neatroots/);
    }
    expect((await run(['--help'], env, dir)).out.join('\n')).toContain('replay');
    const bad = await run(['replay', '--bogus', 'x'], env, dir);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('unknown option --bogus');
    expect((await run(['nope'], env, dir)).code).toBe(2);
  });
});
