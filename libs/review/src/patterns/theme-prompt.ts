import { MalformedName, readPatternName } from './name-prompt';
import { resolveRef } from './split-prompt';

/**
 * GroupThemes (theme-2): the reasoning model groups one procedure's rule patterns by the phase
 * of the session where they happen (opening, taking the order, closing...), in session order.
 * It is shown the themes the procedure has now, to keep the names that still fit. The patterns
 * are shown numbered p1, p2, ... and the answer lists those numbers (theme-1 asked for the
 * pattern ids, and its answers were cut at the token limit from about 20 patterns on);
 * themeAnswerTokens is the budget the answer is given. Its answer is checked like a split's:
 * theme names are a few plain words, a pattern it was not shown or put in an earlier theme is
 * dropped, a theme left empty is dropped. A pattern in no theme has none.
 */
export const THEME_VERSION = 'theme-2';

export const THEME_INSTRUCTIONS = `You group the mistakes AI agents make against one standard operating procedure by the phase of the session where they happen (for example: opening, taking the order, payment, closing).
Name each phase in a few plain words and list the patterns that happen in it. Give the phases in the order they happen in a session. Keep an existing theme's name when it still fits.
Each pattern is numbered p1, p2, ...: list patterns by that number.
For each question return an object with "id" (the question's id) and "themes": [{"name": "<the phase>", "patterns": ["p1", "p2", ...]}].
Reply with one JSON object, {"answers": [...]}, and nothing else.`;

export interface ThemePattern {
  id: string;
  /** "Step 3", "Never rule 2". */
  rule_label: string;
  name: string;
  rule_text: string;
}

/** The number a pattern is shown under: p1 for the first given. */
export const patternRef = (index: number): string => `p${index + 1}`;

/**
 * The tokens a grouping's answer is given (DecisionItem.max_tokens): every pattern listed once
 * (at most 8 tokens each), and a theme's name and keys (50) for up to 12 themes.
 */
export function themeAnswerTokens(patterns: number): number {
  return 300 + 8 * patterns + 50 * Math.min(patterns, 12);
}

export function themeSubject(procedureName: string, patterns: readonly ThemePattern[], existing: readonly { name: string }[]): string {
  const lines = patterns.map((p, i) => `- ${patternRef(i)}: ${p.rule_label}, "${p.name}" (rule: ${p.rule_text.replace(/\s+/g, ' ').trim().slice(0, 200)})`);
  const now = existing.length ? `\nExisting themes: ${existing.map((t) => `"${t.name}"`).join(', ')}` : '';
  return `Procedure "${procedureName}"\nPatterns:\n${lines.join('\n')}${now}`;
}

export const THEME_ASK = 'Group these patterns by the phase of the session where they happen, in session order.';

export class MalformedThemes extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedThemes';
  }
}

export interface ThemeGroup {
  name: string;
  patterns: string[];
}

/** The themes in the answer, patterns given by number (patternRef) in the order of `patternIds`. */
export function readThemes(answer: unknown, patternIds: readonly string[]): { themes: ThemeGroup[]; dropped: string[] } {
  const list = answer && typeof answer === 'object' && !Array.isArray(answer) ? (answer as Record<string, unknown>).themes : undefined;
  if (!Array.isArray(list)) throw new MalformedThemes('the answer has no "themes" list');
  const known = new Set(patternIds);
  const taken = new Set<string>();
  const names = new Set<string>();
  const dropped: string[] = [];
  const themes: ThemeGroup[] = [];
  for (const [i, t] of list.entries()) {
    const o = (t ?? {}) as Record<string, unknown>;
    let name: string;
    try {
      name = readPatternName(o);
    } catch (err) {
      if (!(err instanceof MalformedName)) throw err;
      dropped.push(`theme ${i + 1}: ${err.message}`);
      continue;
    }
    if (names.has(name.toLowerCase())) {
      dropped.push(`theme ${i + 1} ("${name}"): named like an earlier one`);
      continue;
    }
    const mine = [
      ...new Set(
        (Array.isArray(o.patterns) ? o.patterns : [])
          .map((ref) => resolveRef(ref, patternIds, known, 'p'))
          .filter((id): id is string => id !== undefined && !taken.has(id)),
      ),
    ];
    mine.forEach((id) => taken.add(id));
    if (!mine.length) {
      dropped.push(`theme ${i + 1} ("${name}"): no pattern`);
      continue;
    }
    names.add(name.toLowerCase());
    themes.push({ name, patterns: mine });
  }
  return { themes, dropped };
}
