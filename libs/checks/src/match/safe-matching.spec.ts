import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CheckParseCache, loadChecks } from '../sources';
import { DisabledChecks } from './disabled';
import { MatchWorker } from './pool';
import { SafeMatching } from './safe-matching';

/** What decides where a pattern runs, and what a disabled check does. The time limit itself: freeze.spec.ts. */
describe('SafeMatching', () => {
  let matching: SafeMatching;
  let disabled: DisabledChecks;
  beforeEach(() => {
    disabled = new DisabledChecks();
    matching = new SafeMatching({ disabled, warn: () => undefined });
  });
  afterEach(() => matching.close());
  const cache = new CheckParseCache();
  const matchYaml = (id: string, pattern: string) => `id: ${id}\nkind: rule\ntitle: ${id}\nrule:\n  type: match\n  span: {}\n  pattern: '${pattern}'\n  in: [output]\n`;

  const long = Buffer.from('x'.repeat(150_000) + ' refund issued');

  it('runs the library\'s patterns inline, whatever the text', () => {
    const m = matching.matcher({ id: 'lib', source: 'library' }, 'refund');
    expect(m.test(long)).toBe(true);
    expect(m.test(Buffer.from('nothing'))).toBe(false);
  });

  it('runs a user pattern inline when the call is provably cheap, and off the event loop when not', async () => {
    const m = matching.matcher({ id: 'mine', source: 'user' }, 'refund');
    expect(m.test(Buffer.from('a refund'))).toBe(true);
    expect(m.test('no')).toBe(false);
    const later = m.test(long);
    expect(later).toBeInstanceOf(Promise);
    await expect(later).resolves.toBe(true);
    await expect(m.test(Buffer.from('y'.repeat(150_000)))).resolves.toBe(false);
  });

  it('sends what one engine batch asks for in one message, answers in order', async () => {
    const run = jest.spyOn(MatchWorker.prototype, 'run');
    const a = matching.matcher({ id: 'a', source: 'project' }, 'refund');
    const b = matching.matcher({ id: 'b', source: 'database' }, '(?i)REFUND ISSUED$');
    const c = matching.matcher({ id: 'c', source: 'user' }, 'chargeback');
    const other = Buffer.from('z'.repeat(150_000) + ' chargeback');
    const answers = await Promise.all([a.test(long), b.test(long), c.test(long), c.test(other), a.test(other)]);
    expect(answers).toEqual([true, true, false, true, false]);
    expect(run).toHaveBeenCalledTimes(1);
    // The two texts went once each, however many patterns read them.
    expect(new Set(run.mock.calls[0][0].map((j) => j.text)).size).toBe(2);
    run.mockRestore();
  });

  it('skips a disabled check at once, also after a reload; a changed pattern runs again', () => {
    const before = matching.matcher({ id: 'slow', source: 'user' }, 'refund');
    disabled.add({ check_id: 'slow', pattern: 'refund', reason: 'slow', ms: 60, limit_ms: 50, since: '' });
    expect(before.test(long)).toBe(false);
    expect(matching.matcher({ id: 'slow', source: 'user' }, 'refund').test(Buffer.from('a refund'))).toBe(false);
    expect(matching.matcher({ id: 'slow', source: 'user' }, 'refunds?').test(Buffer.from('a refund'))).toBe(true);
    // Another check with the same pattern is not affected.
    expect(matching.matcher({ id: 'other', source: 'user' }, 'refund').test(Buffer.from('a refund'))).toBe(true);
  });

  it("keeps another project's check of the same id and pattern running when one project's is disabled", () => {
    const mine = matching.matcher({ id: 'pii', source: 'database', applies_to: { project: ['alpha'] } }, 'refund');
    const theirs = matching.matcher({ id: 'pii', source: 'database', applies_to: { project: ['beta'] } }, 'refund');
    disabled.add({ check_id: 'pii', pattern: 'refund', source: 'database', projects: ['alpha'], reason: 'slow', ms: 60, limit_ms: 50, since: '' });
    expect(mine.test(Buffer.from('a refund'))).toBe(false);
    expect(theirs.test(Buffer.from('a refund'))).toBe(true);
    expect(disabled.has('pii', 'refund', { projects: ['alpha'] })).toBe(true);
    expect(disabled.has('pii', 'refund', { projects: ['beta'] })).toBe(false);
  });

  it('compiles again only the checks it was not given last time; a kept check disabled stays so, a changed one turns back on', () => {
    const { checks } = loadChecks({ home: false, library: false, database: ['a', 'b', 'c'].map((id) => ({ id, yaml: matchYaml(id, `${id}-[0-9]+`), origin: 'cli' })), cache });
    const first = matching.compile(checks);
    expect(matching.compiledRules).toBe(3);
    disabled.add({ check_id: 'a', pattern: 'a-[0-9]+', source: 'database', reason: 'slow', ms: 60, limit_ms: 50, since: new Date(0).toISOString() });
    // c changed, d new: two compiled; a and b kept as they were (the same compiled rules).
    const next = loadChecks({ home: false, library: false, database: [['a', 'a-[0-9]+'], ['b', 'b-[0-9]+'], ['c', 'c2-[0-9]+'], ['d', 'd-[0-9]+']].map(([id, p]) => ({ id, yaml: matchYaml(id, p), origin: 'cli' })), cache });
    const second = matching.compile(next.checks);
    expect(matching.compiledRules).toBe(5);
    expect(second.version).not.toBe(first.version);
    expect(second.rules.slice(0, 2)).toEqual(first.rules.slice(0, 2));
    expect(second.rules[0]).toBe(first.rules[0]);
    expect(second.rules.map((r) => r.check.id)).toEqual(['a', 'b', 'c', 'd']);
    // a's pattern is still in effect: it stays disabled, and its kept matcher knows it.
    expect(disabled.has('a', 'a-[0-9]+')).toBe(true);
    expect((second.rules[0].data as { test(t: string): unknown }).test('a-1')).toBe(false);
    expect((second.rules[1].data as { test(t: string): unknown }).test('b-1')).toBe(true);
    // a's pattern changed: it leaves the list, and its new pattern runs.
    const third = matching.compile(loadChecks({ home: false, library: false, database: [{ id: 'a', yaml: matchYaml('a', 'a2-[0-9]+'), origin: 'cli' }], cache }).checks);
    expect(matching.compiledRules).toBe(6);
    expect(disabled.has('a', 'a-[0-9]+')).toBe(false);
    expect((third.rules[0].data as { test(t: string): unknown }).test('a2-1')).toBe(true);
  });

  it("keeps an overridden check's rule while neither it nor its override changed; compiles it again when either does", () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-narrow-'));
    const shop = path.join(home, 'shop');
    try {
      fs.mkdirSync(path.join(home, 'checks'), { recursive: true });
      fs.mkdirSync(path.join(shop, '.neatroots', 'checks'), { recursive: true });
      const write = (file: string, pattern: string) => fs.writeFileSync(file, matchYaml('leak', pattern));
      const userFile = path.join(home, 'checks', 'leak.yaml');
      const shopFile = path.join(shop, '.neatroots', 'checks', 'leak.yaml');
      write(userFile, 'user-[0-9]+');
      write(shopFile, 'shop-[0-9]+');
      const own = new CheckParseCache();
      const load = () => loadChecks({ home, library: false, projects: [{ name: 'shop', path: shop, steering: false }], cache: own }).checks;
      const test = (set: ReturnType<SafeMatching['compile']>, source: string, text: string) =>
        (set.rules.find((r) => r.check.source === source)!.data as { test(t: string): unknown }).test(text);
      const first = matching.compile(load());
      // The user's check, narrowed (not in shop), and shop's own.
      expect(first.rules.map((r) => [r.check.source, r.check.applies_to])).toEqual([
        ['user', { not_project: ['shop'] }],
        ['project', { project: ['shop'] }],
      ]);
      expect(matching.compiledRules).toBe(2);
      // Nothing changed: nothing compiled, the narrowed check's rule kept.
      const second = matching.compile(load());
      expect(matching.compiledRules).toBe(2);
      expect(second.rules[0]).toBe(first.rules[0]);
      // The override changed: it is compiled, the narrowed base kept (same check, same scope).
      write(shopFile, 'shop2-[0-9]+');
      const third = matching.compile(load());
      expect(matching.compiledRules).toBe(3);
      expect(third.rules[0]).toBe(first.rules[0]);
      expect(test(third, 'project', 'shop2-1')).toBe(true);
      expect(test(third, 'project', 'shop-1')).toBe(false);
      // The base changed: it is narrowed and compiled again, and its new pattern runs.
      write(userFile, 'user2-[0-9]+');
      const fourth = matching.compile(load());
      expect(matching.compiledRules).toBe(4);
      expect(fourth.rules[0]).not.toBe(first.rules[0]);
      expect(fourth.rules[0].check.applies_to).toEqual({ not_project: ['shop'] });
      expect(test(fourth, 'user', 'user2-1')).toBe(true);
      expect(test(fourth, 'user', 'user-1')).toBe(false);
      expect(fourth.rules[1]).toBe(third.rules[1]);
      // The override gone: the base's scope changed (every project), so compiled again.
      fs.rmSync(shopFile);
      const fifth = matching.compile(load());
      expect(matching.compiledRules).toBe(5);
      expect(fifth.rules.map((r) => [r.check.source, r.check.applies_to])).toEqual([['user', undefined]]);
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('refuses a pattern over the bounds when the check is compiled', () => {
    expect(() => matching.matcher({ id: 'big', source: 'user' }, '([a-z]{1,1000}x)'.repeat(50))).toThrow(/repeats something 1000 times/);
  });
});
