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

  it('shows every character that reads as nothing in an id or a name as a marker, so two ids never look the same', () => {
    expect(shown('run-1\u200B')).toBe('run-1⟨U+200B⟩');
    expect(shown('r5-run-\u200B\u200C\u200D\u2060\uFEFF\u00AD')).toBe('r5-run-⟨U+200B⟩⟨U+200C⟩⟨U+200D⟩⟨U+2060⟩⟨U+FEFF⟩⟨U+00AD⟩');
    // The audit's run: bidi controls and zero-width characters together.
    expect(shown('r5-run-\u202Egnp.exe\u2066x\u2069\u200B\u200D\uFEFF')).toBe('r5-run-⟨U+202E⟩gnp.exe⟨U+2066⟩x⟨U+2069⟩⟨U+200B⟩⟨U+200D⟩⟨U+FEFF⟩');
    expect(shown('a\u034Fb\u115F\u3164\uFFA0\u180Ec\u2062\u206Ad\uFE0Fe\u{E0041}\u{E007F}\u{1BCA0}')).toBe(
      'a⟨U+034F⟩b⟨U+115F⟩⟨U+3164⟩⟨U+FFA0⟩⟨U+180E⟩c⟨U+2062⟩⟨U+206A⟩d⟨U+FE0F⟩e⟨U+E0041⟩⟨U+E007F⟩⟨U+1BCA0⟩',
    );
    // No two different ids read the same.
    const ids = ['run-1', 'run-1\u200B', '\uFEFFrun-1', 'run\u00AD-1', 'run-\u200D1', 'run-1\u2060', 'run-1\uFE0F'];
    expect(new Set(ids.map(shown)).size).toBe(ids.length);
  });

  it("leaves an emoji's joiners and selectors as written, and marks a joiner left dangling after one", () => {
    expect(shown('check ⚠\uFE0F')).toBe('check ⚠\uFE0F');
    expect(shown('👩\u200D💻 and 👩🏽\u200D💻 and ❤\uFE0F\u200D🔥')).toBe('👩\u200D💻 and 👩🏽\u200D💻 and ❤\uFE0F\u200D🔥');
    expect(shown('👍\u200D')).toBe('👍⟨U+200D⟩');
    expect(shown('a\uFE0F\u200Db')).toBe('a⟨U+FE0F⟩⟨U+200D⟩b');
  });

  it('keeps the zero-width joiners of text in writing that needs them (transcripts keep them)', () => {
    expect(shownText('run-1\u200B \u0915\u094D\u200D\u0937')).toBe('run-1\u200B \u0915\u094D\u200D\u0937');
  });

  it("shows in text the ones that reorder characters, and leaves the marks right-to-left writing uses", () => {
    expect(shownText('Issue the refund \u202egnp.exe')).toBe('Issue the refund ⟨U+202E⟩gnp.exe');
    expect(shownText('שלום\u200f, world\u2067!')).toBe('שלום\u200f, world⟨U+2067⟩!');
  });
});
