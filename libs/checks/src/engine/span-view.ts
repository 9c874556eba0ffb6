import { canonicalJson, valueText, MAX_TEXT_CHARS, type Span } from '@neatroots/spans';
import type { MatchField } from '../types';

/**
 * What the rules read of one span, computed at most once however many rules read it:
 * the JSON of its arguments and result, the values `repeat` compares, the text `match` reads.
 */
export class SpanView {
  private inputText?: string;
  private outputText?: string;
  private inputCanon?: string;
  private outputCanon?: string;
  private texts?: Map<string, Buffer>;
  private sames?: Map<readonly string[], string>;

  constructor(readonly span: Span) {}

  same(fields: readonly string[]): string {
    let v = this.sames?.get(fields);
    if (v === undefined) {
      v = fields.length === 1 ? this.sameValue(fields[0]) : fields.map((f) => this.sameValue(f)).join('\u0001');
      (this.sames ??= new Map()).set(fields, v);
    }
    return v;
  }

  private sameValue(field: string): string {
    const s = this.span;
    switch (field) {
      case 'tool':
        return s.tool ?? '';
      case 'name':
        return s.name;
      case 'input':
        return (this.inputCanon ??= canonicalJson(s.input));
      case 'output':
        return (this.outputCanon ??= canonicalJson(s.output));
      case 'error':
        return s.error ?? '';
      default:
        return '';
    }
  }

  private field(f: MatchField): string {
    const s = this.span;
    if (f === 'input') return (this.inputText ??= valueText(s.input));
    if (f === 'output') return (this.outputText ??= valueText(s.output));
    return f === 'error' ? (s.error ?? '') : s.name;
  }

  /**
   * The text `match` reads: the fields asked for, the first 200,000 characters in all,
   * converted to UTF-8 once (RE2 would convert a string again on every test).
   */
  text(fields: readonly MatchField[]): Buffer {
    const key = fields.join(',');
    let buf = this.texts?.get(key);
    if (buf !== undefined) return buf;
    let out = '';
    for (const f of fields) {
      if (out.length >= MAX_TEXT_CHARS) break;
      const part = this.field(f);
      if (!part) continue;
      out += out ? `\n${part}` : part;
    }
    buf = Buffer.from(out.length > MAX_TEXT_CHARS ? out.slice(0, MAX_TEXT_CHARS) : out, 'utf8');
    (this.texts ??= new Map()).set(key, buf);
    return buf;
  }
}

/** What the rules read of a run's end: the final answer's text, lower-cased once. */
export class RunEndView {
  private final?: string;

  constructor(private readonly finalOutput: unknown) {}

  finalText(): string {
    return (this.final ??= valueText(this.finalOutput).toLowerCase());
  }
}
