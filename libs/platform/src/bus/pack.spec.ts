import { packCount, packValues, planPacks, unpackValues, PACK_ITEM_OVERHEAD, PACK_OVERHEAD } from './pack';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('packs', () => {
  it('gives back the values it was made of, in order, empty ones included', () => {
    const values = ['a', '', 'ccc', '{"i":3}'].map(bytes);
    const pack = packValues(values);
    expect(packCount(pack)).toBe(4);
    expect(unpackValues(pack).map((v) => new TextDecoder().decode(v))).toEqual(['a', '', 'ccc', '{"i":3}']);
  });

  it('refuses a pack whose framing is damaged, saying where', () => {
    const pack = packValues(['abc', 'def'].map(bytes));
    expect(() => unpackValues(pack.subarray(0, pack.length - 1))).toThrow(/value 1 of 3 bytes runs past the end/);
    expect(() => unpackValues(Buffer.concat([pack, Buffer.from([0])]))).toThrow(/1 bytes left over/);
    expect(() => unpackValues(new Uint8Array(2))).toThrow(/no count/);
  });

  it('plans a pack per key in publish order within the key, each within the byte bound', () => {
    const keys = ['a', 'b', 'a', 'c', 'a', 'b'];
    expect(planPacks(keys, keys.map(() => 10), 1000)).toEqual([
      { key: 'a', indexes: [0, 2, 4] },
      { key: 'b', indexes: [1, 5] },
      { key: 'c', indexes: [3] },
    ]);
    const max = PACK_OVERHEAD + 2 * (PACK_ITEM_OVERHEAD + 10);
    const plan = planPacks(keys, keys.map(() => 10), max);
    expect(plan).toEqual([
      { key: 'a', indexes: [0, 2] },
      { key: 'a', indexes: [4] },
      { key: 'b', indexes: [1, 5] },
      { key: 'c', indexes: [3] },
    ]);
    // a value bigger than the bound travels alone
    expect(planPacks(['a', 'a', 'a'], [5, 5000, 5], 100)).toEqual([
      { key: 'a', indexes: [0] },
      { key: 'a', indexes: [1] },
      { key: 'a', indexes: [2] },
    ]);
  });
});
