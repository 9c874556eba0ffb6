import fc from 'fast-check';
import { canonicalJson, valueText } from './text';

/** The same value with every object's keys in a shuffled order (by `seed`). */
function reordered(v: unknown, seed: number): unknown {
  if (Array.isArray(v)) return v.map((x, i) => reordered(x, seed + i));
  if (!v || typeof v !== 'object') return v;
  const keys = Object.keys(v);
  const order = keys.map((k, i) => ({ k, r: Math.sin(seed * 31 + i) })).sort((a, b) => a.r - b.r);
  const out: Record<string, unknown> = {};
  // defineProperty: a key named __proto__ stays an own key (assigning it would set the prototype)
  for (const { k } of order) Object.defineProperty(out, k, { value: reordered((v as Record<string, unknown>)[k], seed + 7), enumerable: true, writable: true, configurable: true });
  return out;
}

/** Every object's keys sorted, the text built by hand: what canonical JSON means. */
function sortedText(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedText).join(',')}]`;
  if (!v || typeof v !== 'object') return JSON.stringify(v);
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedText(o[k])}`).join(',')}}`;
}

const objectKeys = (s: string): string[] => {
  const keys: string[] = [];
  JSON.parse(s, function (this: unknown, k) {
    if (this && typeof this === 'object' && !Array.isArray(this) && k !== '') keys.push(k);
    return (this as Record<string, unknown>)[k];
  });
  return keys;
};

describe('canonicalJson', () => {
  it('writes one text for a value whatever the order of its keys, the value itself', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), fc.integer(), (v, seed) => {
        const text = canonicalJson(v);
        expect(canonicalJson(reordered(v, seed))).toBe(text);
        expect(text).toBe(sortedText(v));
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps a key named __proto__ whatever order it came in (the counterexample fast-check found)', () => {
    const v = JSON.parse('{"__proto__":false}');
    expect(canonicalJson(reordered(v, 0))).toBe(canonicalJson(v));
    expect(canonicalJson(v)).toBe('{"__proto__":false}');
  });

  it('sorts keys that arrive out of order, at any depth, and numbers-as-keys as strings', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}');
    // integer-like keys come first in an object's own order; sorted as text, "10" is before "2"
    expect(canonicalJson({ 2: 'x', 10: 'y', a: 'z' })).toBe('{"10":"y","2":"x","a":"z"}');
    expect(objectKeys(canonicalJson({ q: 1, page: 2 }))).toEqual(['page', 'q']);
  });

  it('sorts by UTF-16 code units as Array#sort does, for a few keys and for many', () => {
    // U+FF5E is one code unit above the surrogate pair of U+1F600: sorted as code units, the emoji comes first.
    expect(canonicalJson({ '\uff5e': 1, '\u{1f600}': 2, B: 3, a: 4 })).toBe('{"B":3,"a":4,"\u{1f600}":2,"\uff5e":1}');
    const many: Record<string, number> = {};
    for (let i = 40; i > 0; i--) many[`k${i}`] = i;
    const keys = objectKeys(canonicalJson(many));
    expect(keys).toEqual(Object.keys(many).sort());
    expect(keys.slice(0, 3)).toEqual(['k1', 'k10', 'k11']);
  });

  it('leaves out undefined members as JSON does, and writes a Date as an object of its own keys', () => {
    expect(canonicalJson({ a: undefined, b: [undefined, 1] })).toBe('{"b":[null,1]}');
    expect(canonicalJson({ b: 1, a: undefined })).toBe('{"b":1}');
    // not plain JSON: read by its own keys (none), the same whichever way it is built
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":{}}');
    expect(canonicalJson(undefined)).toBe('');
    expect(canonicalJson('a')).toBe('"a"');
  });

  it("writes strings and numbers, as keys and values, exactly as JSON.stringify does (quotes, control characters, lone surrogates, -0, exponents)", () => {
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    fc.assert(
      fc.property(text, text, fc.double(), (k, s, n) => {
        expect(canonicalJson(s)).toBe(JSON.stringify(s));
        expect(canonicalJson(n)).toBe(JSON.stringify(n));
        const o = JSON.parse(`{${JSON.stringify(k)}:[${JSON.stringify(s)},${JSON.stringify(n)}]}`);
        expect(canonicalJson(o)).toBe(JSON.stringify(o));
      }),
      { numRuns: 2000 },
    );
    for (const s of ['"', '\\', '\u0000', '\u001f', '\u007f', '\u2028', '\ud800', 'a\udc00', '\u{1f600}', 'line\nbreak', 'tab\t'])
      expect(canonicalJson({ [s]: s })).toBe(JSON.stringify({ [s]: s }));
    for (const n of [-0, 0, 1e21, 1e-7, 5e-324, -1.5, 2 ** 53, NaN, Infinity, -Infinity]) expect(canonicalJson([n])).toBe(JSON.stringify([n]));
    expect(canonicalJson([true, false, null])).toBe('[true,false,null]');
  });
});

describe('valueText', () => {
  it('reads strings as they are, MCP content as its text, other values as JSON, within the limit', () => {
    expect(valueText('plain')).toBe('plain');
    expect(valueText({ content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] })).toBe('one\ntwo');
    expect(valueText({ b: 1, a: 2 })).toBe('{"b":1,"a":2}');
    expect(valueText('x'.repeat(50), 10)).toBe('x'.repeat(10));
    expect(valueText(null)).toBe('');
  });
});
