import { canonicalJson, valueText, MAX_TEXT_CHARS, type Span } from '@neatroots/spans';
import type { MatchField } from '../types';
import RE2 from 're2';
import type { JointPattern, TextMatcher } from './compile';
import { fingerprint } from './ids';
import type { JointMatch } from './joint';

/** A streak keeps the values it compares as they are up to this length, else their fingerprint. */
const MAX_SAME_CHARS = 96;

/** The text of a span with nothing to read: one buffer for all of them. */
const EMPTY = Buffer.alloc(0);

/** Each pattern's answer on an empty text (by its JointPattern: the pattern as compiled). */
const emptyAnswers = new WeakMap<JointPattern, boolean>();

function onEmpty(j: JointPattern): boolean {
  let hit = emptyAnswers.get(j);
  if (hit === undefined) {
    hit = new RE2(j.source).test(EMPTY);
    emptyAnswers.set(j, hit);
  }
  return hit;
}

function sameFields(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** How a `match` rule reads a span in one plan: its text's key, and the pass it joins. */
export interface MatchPlan {
  /** The `in` fields joined: rules with the same key read the same text. */
  key: string;
  joint?: JointMatch;
  /** Its place in the joint's members. */
  member: number;
  /**
   * The text the pass reads when it is not the rule's own: one that holds it (the rule reads
   * `output`, the pass `input` and `output`; plan.ts withinPass). The pass's miss is the rule's;
   * its hit is asked of the rule's own text alone.
   */
  pass?: { key: string; fields: readonly MatchField[] };
}

/**
 * What the rules read of one span, computed at most once however many rules read it:
 * the JSON of its arguments and result, the values `repeat` compares, the text `match` reads
 * (only once a `match` rule's filter passed) and the answers of a joint pass over that text.
 * The engine keeps one and resets it for each span: nothing is allocated for a span that no
 * rule reads.
 */
export class SpanView {
  span!: Span;
  private inputText?: string;
  private outputText?: string;
  private inputCanon?: string;
  private outputCanon?: string;
  // Small lists, searched in order (a span has a few texts and compared values at most),
  // reused from span to span.
  private readonly textKeys: string[] = [];
  private readonly textBufs: Buffer[] = [];
  /** Whether the text was cut at MAX_TEXT_CHARS (a field's text left out or shortened). */
  private readonly textCut: boolean[] = [];
  private texts = 0;
  private readonly sameKeys: (readonly string[])[] = [];
  private readonly sameVals: (string | undefined)[] = [];
  private sames = 0;
  private readonly passed: JointMatch[] = [];
  private readonly passOk: boolean[] = [];
  private passes = 0;
  private plans?: ReadonlyMap<object, MatchPlan>;

  constructor(span?: Span) {
    if (span) this.reset(span);
  }

  /**
   * The next span: what was read of the previous one is forgotten. `plans`: how the `match`
   * rules that apply to it read it (by rule), from the engine's plan for spans like it.
   */
  reset(span: Span, plans?: ReadonlyMap<object, MatchPlan>): this {
    this.span = span;
    this.plans = plans;
    this.inputText = this.outputText = this.inputCanon = this.outputCanon = undefined;
    this.texts = this.sames = this.passes = 0;
    return this;
  }

  /**
   * What `repeat` compares for `fields`, as its streak keeps it: the values as they are when
   * short, else their fingerprint. Once per span for every rule comparing the same fields
   * (the rules' lists are told apart by content: each rule has its own array). Undefined when
   * the span lacks one of them (arguments not recorded, which is the OpenTelemetry default, no
   * output, no tool name): an unknown value is equal to nothing, not to another unknown one.
   */
  sameKey(fields: readonly string[]): string | undefined {
    for (let i = 0; i < this.sames; i++) if (sameFields(this.sameKeys[i], fields)) return this.sameVals[i];
    let v: string | undefined = this.sameValue(fields[0]);
    for (let i = 1; i < fields.length && v !== undefined; i++) {
      const next = this.sameValue(fields[i]);
      v = next === undefined ? undefined : `${v}\u0001${next}`;
    }
    const key = v === undefined || v.length <= MAX_SAME_CHARS ? v : fingerprint(v);
    this.sameKeys[this.sames] = fields;
    this.sameVals[this.sames++] = key;
    return key;
  }

  private sameValue(field: string): string | undefined {
    const s = this.span;
    switch (field) {
      case 'tool':
        return s.tool;
      case 'name':
        return s.name;
      case 'input':
        return s.input === undefined ? undefined : (this.inputCanon ??= canonicalJson(s.input));
      case 'output':
        return s.output === undefined ? undefined : (this.outputCanon ??= canonicalJson(s.output));
      case 'error':
        return s.error ?? undefined;
      default:
        return undefined;
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
  text(fields: readonly MatchField[], key = fields.join(',')): Buffer {
    const i = this.textAt(fields, key);
    return this.textBufs[i];
  }

  /** The place of the text of `fields` in the lists, built first if it is not there. */
  private textAt(fields: readonly MatchField[], key: string): number {
    for (let i = 0; i < this.texts; i++) if (this.textKeys[i] === key) return i;
    let out = '';
    let cut = false;
    for (const f of fields) {
      if (out.length >= MAX_TEXT_CHARS) {
        cut = true;
        break;
      }
      const part = this.field(f);
      if (!part) continue;
      out += out ? `\n${part}` : part;
    }
    if (out.length > MAX_TEXT_CHARS) {
      out = out.slice(0, MAX_TEXT_CHARS);
      cut = true;
    }
    const buf = !out ? EMPTY : Buffer.from(out, 'utf8');
    this.textKeys[this.texts] = key;
    this.textCut[this.texts] = cut;
    this.textBufs[this.texts] = buf;
    return this.texts++;
  }

  /** Whether the text of `fields` is empty: none of them has text. */
  private blank(fields: readonly MatchField[]): boolean {
    for (const f of fields) if (this.field(f)) return false;
    return true;
  }

  /** The joint's pass over `text`, run once per span; false when it could not run. */
  private pass(joint: JointMatch, text: Buffer): boolean {
    for (let i = 0; i < this.passes; i++) if (this.passed[i] === joint) return this.passOk[i];
    const ok = joint.run(text);
    this.passed[this.passes] = joint;
    this.passOk[this.passes++] = ok;
    return ok;
  }

  /**
   * Whether `rule`'s pattern (`matcher`) matches the text of `fields`: from the span's one pass
   * over that text with the other patterns of its plan's joint when it has one, else alone.
   */
  match(rule: object, matcher: TextMatcher, fields: readonly MatchField[]): boolean | Promise<boolean> {
    const plan = this.plans?.get(rule);
    const joint = plan?.joint;
    const pass = plan?.pass;
    if (joint && pass && !this.blank(fields)) {
      // The pass reads a text that holds this one (plan.ts withinPass): a miss there is a miss
      // here. A hit, or no pass (the whole cut at MAX_TEXT_CHARS, too long for the pass, RE2
      // gave up), is asked of this text alone.
      const at = this.textAt(pass.fields, pass.key);
      if (!this.textCut[at] && this.pass(joint, this.textBufs[at]) && joint.covers(plan.member) && joint.hits[plan.member] === 0) return false;
      return matcher.test(this.text(fields, plan.key));
    }
    const text = this.text(fields, plan?.key);
    // Nothing to read (an LLM call whose prompt was not recorded, a tool with no result): the
    // pattern's answer on no text, found once per pattern, instead of a call into RE2 per span.
    if (text.length === 0 && matcher.joint?.live()) return onEmpty(matcher.joint);
    // The pass runs once per span, for the first of its rules whose filter passed.
    if (!joint || pass) return matcher.test(text);
    return this.pass(joint, text) && joint.covers(plan.member) ? joint.hits[plan.member] === 1 : matcher.test(text);
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
