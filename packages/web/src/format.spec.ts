import { count, duration, shown, shownText } from '../app/format';

describe('how the pages read a duration', () => {
  it('rounds first, so a value that rounds up reads in the next unit', () => {
    expect(duration(119_600)).toBe('2 min 0 s');
    expect(duration(59_999)).toBe('1 min 0 s');
    expect(duration(59_949)).toBe('59.9 s');
    expect(duration(9_996)).toBe('10.0 s');
    expect(duration(999.6)).toBe('1.00 s');
    expect(duration(60_499)).toBe('1 min 0 s');
    expect(duration(60_500)).toBe('1 min 1 s');
  });

  it('reads each unit as before', () => {
    expect(duration(0)).toBe('0 ms');
    expect(duration(999.4)).toBe('999 ms');
    expect(duration(1_234)).toBe('1.23 s');
    expect(duration(12_345)).toBe('12.3 s');
    expect(duration(61_000)).toBe('1 min 1 s');
    expect(duration(3_600_000)).toBe('60 min 0 s');
    expect(duration(undefined)).toBe('');
    expect(duration(Number.NaN)).toBe('');
  });

  it('counts in words: "1 error", "2 errors"', () => {
    expect(count(1, 'error')).toBe('1 error');
    expect(count(2, 'error')).toBe('2 errors');
  });
});

describe("how the pages show an agent's bidi control characters", () => {
  it('shows every one in an id or a name as a marker, so none makes it read as another', () => {
    expect(shown('run2-\u202ecod.exe')).toBe('run2-⟨U+202E⟩cod.exe');
    expect(shown('a\u202ab\u202bc\u202cd\u202de\u2066f\u2067g\u2068h\u2069i')).toBe('a⟨U+202A⟩b⟨U+202B⟩c⟨U+202C⟩d⟨U+202D⟩e⟨U+2066⟩f⟨U+2067⟩g⟨U+2068⟩h⟨U+2069⟩i');
    expect(shown('\u200e\u200f\u061c')).toBe('⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩');
    expect(shown('refund-agent שלום')).toBe('refund-agent שלום');
  });

  it("shows in text the ones that reorder characters, and leaves the marks right-to-left writing uses", () => {
    expect(shownText('Issue the refund \u202egnp.exe')).toBe('Issue the refund ⟨U+202E⟩gnp.exe');
    expect(shownText('שלום\u200f, world\u2067!')).toBe('שלום\u200f, world⟨U+2067⟩!');
  });
});
