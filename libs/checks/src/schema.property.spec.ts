/**
 * Property tests of the check parser (check YAML is user input too): no text, no YAML value
 * and no mutation of a real check makes it throw anything but a CheckError naming the file,
 * and every check it accepts is a fixpoint (its normal form parses back to itself).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { parseAllDocuments, stringify } from 'yaml';
import { parseCheck, parseCheckFile } from './schema';
import { CheckError, type Check } from './types';

const LIBRARY = path.resolve(__dirname, '../../../packages/neatroots/library');
const FILE = 'checks/fuzz.yaml';

function libraryFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? libraryFiles(p) : e.name.endsWith('.yaml') ? [p] : [];
  });
}

/** Every check of the shipped library, as the plain object its YAML is. */
const REAL: Record<string, unknown>[] = libraryFiles(LIBRARY).flatMap((f) =>
  parseAllDocuments(fs.readFileSync(f, 'utf8')).flatMap((d) => {
    const v = d.toJS() as unknown;
    return (Array.isArray(v) ? v : [v]).filter((x): x is Record<string, unknown> => !!x && typeof x === 'object');
  }),
);

/** Runs `fn`: it returns, or throws a CheckError with a message naming the file. */
function onlyCheckErrors<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof CheckError)) throw new Error(`threw ${String((e as Error)?.name)}: ${String((e as Error)?.message ?? e)}`, { cause: e });
    expect(e.message.startsWith(FILE)).toBe(true);
    return undefined;
  }
}

/** The accepted check parses back to itself (its provenance aside). */
function fixpoint(c: Check): void {
  const { source, file, ...raw } = c as Check & { file?: string };
  void file;
  const again = parseCheck(JSON.parse(JSON.stringify(raw)), FILE, source);
  expect(JSON.stringify(again)).toBe(JSON.stringify(c));
}

const value = fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.string({ unit: 'binary' }), fc.constantFrom('(a+)+$', '[', '\\', '{tool}', '*', -1, 1e300, 0.5, '', null));

/** A real check with one field (at the top, or one level down) replaced, added or removed. */
const mutated = fc
  .record({ base: fc.constantFrom(...REAL), key: fc.string({ maxLength: 12 }), pick: fc.nat(), inner: fc.boolean(), v: fc.option(value, { nil: undefined }) })
  .map(({ base, key, pick, inner, v }) => {
    const copy = JSON.parse(JSON.stringify(base)) as Record<string, unknown>;
    const keys = Object.keys(copy);
    let target = copy;
    if (inner) {
      const nestedKey = keys.find((k, i) => i >= pick % keys.length && copy[k] && typeof copy[k] === 'object' && !Array.isArray(copy[k]));
      if (nestedKey) target = copy[nestedKey] as Record<string, unknown>;
    }
    const targetKeys = Object.keys(target);
    const k = targetKeys.length && pick % 3 !== 0 ? targetKeys[pick % targetKeys.length] : key;
    if (v === undefined) delete target[k];
    else target[k] = v;
    return copy;
  });

describe('check YAML parser (properties)', () => {
  it('the shipped library parses, and each check is a fixpoint of the parser', () => {
    expect(REAL.length).toBeGreaterThan(5);
    for (const raw of REAL) fixpoint(parseCheck(raw, FILE, 'library'));
  });

  it('any text: checks, or a CheckError naming the file', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.string(), fc.constantFrom('a: &a [*a]', '- - - -', 'id: x\nkind: rule\nrule: {type: match, pattern: "(a+)+$"}', '%YAML 1.2\n---\n')), (text) => {
        const parsed = onlyCheckErrors(() => parseCheckFile(text, FILE, 'user'));
        parsed?.checks.forEach(fixpoint);
      }),
      { numRuns: 300 },
    );
  });

  it('any YAML value: checks, or a CheckError naming the file', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 5 }), fc.array(fc.dictionary(fc.constantFrom('id', 'kind', 'rule', 'ask', 'title', 'action', 'guidance', 'group', 'type'), value))), (v) => {
        const parsed = onlyCheckErrors(() => parseCheckFile(stringify(v), FILE, 'user'));
        parsed?.checks.forEach(fixpoint);
      }),
      { numRuns: 300 },
    );
  });

  it('any one-field change to a real check: the check (a fixpoint), or a CheckError naming the file', () => {
    fc.assert(
      fc.property(mutated, (raw) => {
        const c = onlyCheckErrors(() => parseCheck(raw, FILE, 'user'));
        if (c) fixpoint(c);
        // and the same through YAML text
        const parsed = onlyCheckErrors(() => parseCheckFile(stringify(raw), FILE, 'user'));
        parsed?.checks.forEach(fixpoint);
      }),
      { numRuns: 500 },
    );
  });
});
