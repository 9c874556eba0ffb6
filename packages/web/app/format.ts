/** How times, durations and numbers read on the pages. */

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return sameDay ? d.toLocaleTimeString() : d.toLocaleString();
}

/**
 * "850 ms", "1.25 s", "12.5 s", "2 min 0 s": rounded to what is shown first, so a value that
 * rounds up reads in the next unit (59,999 ms is "1 min 0 s", never "60.0 s" or "1 min 60 s").
 */
export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '';
  if (Math.round(ms) < 1000) return `${Math.round(ms)} ms`;
  const hundredths = Math.round(ms / 10);
  if (hundredths < 1000) return `${(hundredths / 100).toFixed(2)} s`;
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${(tenths / 10).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

export function percent(p: number | null | undefined): string {
  return p === null || p === undefined ? '—' : `${Math.round(p * 100)}%`;
}

/** A span's input or output as text: strings as they are, anything else as indented JSON. */
export function asText(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

/** Midnight today, in the viewer's time zone ("halted today"). */
export function startOfToday(): Date {
  const d = new Date();
  d.setHours(0, 0, 0, 0);
  return d;
}

/** "1 finding", "2 findings". */
export function count(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * Bidi controls that reorder the characters after them: the embeddings and overrides
 * (U+202A–U+202E) and the isolates (U+2066–U+2069). Left in an agent's text they reverse what
 * follows: `run2-\u202Ecod.exe` reads run2-exe.doc, and past its element the app's own words.
 */
const REORDERING = /[\u202A-\u202E\u2066-\u2069]/g;
/**
 * Those, the marks that move the punctuation and digits beside them (LRM, RLM, the Arabic letter
 * mark), and the characters that show as nothing at all, so `run-1\u200B` and `run-1` would read
 * the same: the soft hyphen, the zero-width space, non-joiner and joiner, the word joiner and the
 * invisible operators, the byte order mark, the combining grapheme joiner, the Hangul fillers,
 * the Khmer inherent vowels, the Mongolian free variation selectors and vowel separator, the
 * deprecated format characters (U+206A–U+206F), the variation selectors, the shorthand format
 * controls, and the tags (U+E0000–U+E0FFF, also how text is hidden inside an emoji). A variation
 * selector right after a pictograph (`⚠️`) and a zero width joiner between two (`👩‍💻`, `❤️‍🔥`)
 * stay as written: they show as the emoji, not as nothing.
 */
const HIDDEN_IN_AN_ID =
  /\u034F|\u17B4|\u17B5|\u180B|\u180C|\u180D|\u180F|[\u00AD\u061C\u115F\u1160\u180E\u200B\u200C\u200E\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFEFF\uFFA0\u{1BCA0}-\u{1BCA3}\u{E0000}-\u{E0FFF}]|(?<!\p{Extended_Pictographic})[\uFE00-\uFE0F]|(?<![\p{Extended_Pictographic}\p{Emoji_Modifier}]\uFE0F?)\u200D|\u200D(?!\p{Extended_Pictographic})/gu;

function marker(c: string): string {
  return `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/**
 * An id or a name as the pages show it: each bidi control and each character that shows as
 * nothing (zero-width, soft hyphen, byte order mark, ...) as a visible marker
 * (`run2-⟨U+202E⟩cod.exe`, `run-1⟨U+200B⟩`), so no hidden character makes it read as another (a
 * fake extension, a twin of another id).
 */
export function shown(s: string): string {
  return s.replace(HIDDEN_IN_AN_ID, marker);
}

/**
 * Text as the pages show it (a transcript, a span's input, a rule, a reason): the controls that
 * reorder characters as markers; the marks right-to-left writing uses (LRM, RLM) as they are.
 */
export function shownText(s: string): string {
  return s.replace(REORDERING, marker);
}
