import type { EvidenceDoc, SpanSummary } from '../types';

/**
 * Hashed word n-grams of the evidence (the feature hashing of Vowpal Wabbit and
 * scikit-learn's HashingVectorizer): words and word pairs are hashed straight into a fixed
 * number of buckets, so no vocabulary is kept and a feature vector is built in one pass over
 * the characters, without allocating a string per word. The same word in a tool's output and
 * in the agent's answer are different features: questions are mostly about how the two relate.
 */
export const FEATURE_BITS = 16;
export const DIMS = 1 << FEATURE_BITS;
const MASK = DIMS - 1;
/** A section longer than this is read as its head and its tail. */
const SECTION_CHARS = 6_000;

export const Section = {
  User: 1,
  System: 2,
  ToolInput: 3,
  ToolOutput: 4,
  Error: 5,
  Final: 6,
  LlmOutput: 7,
  Text: 8,
  FocusInput: 9,
  FocusOutput: 10,
  Structure: 11,
} as const;

/** FNV-1a's offset basis as an int32: a hash kept in int32 range stays a small integer for the JIT. */
const FNV_BASIS = 0x811c9dc5 | 0;
const LOG1P = Float32Array.from({ length: 256 }, (_, i) => Math.log1p(i));
/** ASCII letters and digits, lowercased; 0 for a separator. Anything beyond ASCII is a letter. */
const WORD = Uint8Array.from({ length: 128 }, (_, c) =>
  (c >= 97 && c <= 122) || (c >= 48 && c <= 57) ? c : c >= 65 && c <= 90 ? c | 32 : 0,
);

export interface SparseVector {
  idx: Int32Array;
  val: Float32Array;
}

/**
 * 32-bit multiply. Math.imul would do, but under jest (a vm context) V8 does not inline it and
 * each call costs ~100 ns; exact double arithmetic on 16-bit halves gives the same result fast
 * everywhere, so the classifier's timing measured in tests is the timing in production.
 */
function imul(a: number, b: number): number {
  return ((a & 0xffff) * b + (((a >>> 16) * b) & 0xffff) * 65536) | 0;
}

function mix(h: number): number {
  h ^= h >>> 16;
  h = imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

/** Builds one vector at a time into reused buffers; not reentrant (one per classifier). */
export class Featurizer {
  private readonly counts = new Uint16Array(DIMS);
  private touched = new Int32Array(4096);
  private n = 0;

  private add(i: number): void {
    if (this.counts[i] === 0) {
      if (this.n === this.touched.length) {
        const t = new Int32Array(this.touched.length * 2);
        t.set(this.touched);
        this.touched = t;
      }
      this.touched[this.n++] = i;
    }
    if (this.counts[i] < 0xffff) this.counts[i]++;
  }

  private text(s: string, section: number): void {
    if (s.length > SECTION_CHARS) {
      this.words(s, 0, (SECTION_CHARS * 2) / 3, section);
      this.words(s, s.length - SECTION_CHARS / 3, s.length, section);
    } else this.words(s, 0, s.length, section);
  }

  private words(s: string, from: number, to: number, section: number): void {
    const salt = imul(section, 0x9e3779b1);
    let h = FNV_BASIS;
    let inWord = false;
    let prev = 0;
    for (let i = from; i <= to; i++) {
      const ch = i < to ? s.charCodeAt(i) : 32;
      const c = ch < 128 ? WORD[ch] : ch;
      if (c !== 0) {
        // h*31+c stays exact in a double (|h| < 2^31), so no 32-bit multiply per character;
        // mix() gives the word hash its avalanche.
        h = (h * 31 + c) | 0;
        inWord = true;
      } else if (inWord) {
        this.add(mix(h ^ salt) & MASK);
        if (prev !== 0) this.add(mix(imul(prev, 31) ^ h ^ salt ^ 0x5bd1e995) & MASK);
        prev = h;
        h = FNV_BASIS;
        inWord = false;
      }
    }
  }

  private flag(name: number): void {
    this.add(mix(imul(Section.Structure, 0x9e3779b1) ^ name) & MASK);
  }

  private span(s: SpanSummary, focus: boolean): void {
    if (s.type === 'llm') {
      if (s.output) this.text(s.output, Section.LlmOutput);
      return;
    }
    if (s.tool) this.text(s.tool, focus ? Section.FocusInput : Section.ToolInput);
    if (s.input) this.text(s.input, focus ? Section.FocusInput : Section.ToolInput);
    if (s.output) this.text(s.output, focus ? Section.FocusOutput : Section.ToolOutput);
    if (s.error) this.text(s.error, Section.Error);
    if (s.status === 'error') this.flag(focus ? 11 : 10);
  }

  /** The evidence as an L2-normalised vector of log counts. */
  vector(doc: EvidenceDoc): SparseVector {
    if (doc.user_message) this.text(doc.user_message, Section.User);
    if (doc.system_prompt) this.text(doc.system_prompt, Section.System);
    if (doc.text) this.text(doc.text, Section.Text);
    let tools = 0;
    for (const s of doc.spans) {
      this.span(s, s.id === doc.focus);
      if (s.type === 'tool' || s.type === 'mcp_tool') tools++;
    }
    for (const r of doc.runs ?? []) {
      if (r.final_output) this.text(r.final_output, Section.Final);
      for (const s of r.spans) this.span(s, false);
    }
    if (doc.final_output !== undefined) {
      if (doc.final_output) this.text(doc.final_output, Section.Final);
      else this.flag(20);
    }
    if (doc.run_status && doc.run_status !== 'ok') this.flag(21);
    this.flag(30 + Math.min(6, Math.floor(Math.log2(tools + 1))));
    // Always on: the bias of the hashed model lives in one bucket too.
    this.flag(1);
    return this.take();
  }

  /** One piece of text in a section, as a vector. */
  textVector(s: string, section: number): SparseVector {
    this.text(s, section);
    return this.take();
  }

  /**
   * The score `weight(bucket)` sums to over a piece of text, normalised by its length: ranks
   * quote candidates without building a vector for each.
   */
  textScore(s: string, section: number, weight: (bucket: number) => number): number {
    this.text(s, section);
    let sum = 0;
    for (let j = 0; j < this.n; j++) {
      const i = this.touched[j];
      sum += weight(i);
      this.counts[i] = 0;
    }
    const n = this.n;
    this.n = 0;
    return n ? sum / Math.sqrt(n) : -Infinity;
  }

  private take(): SparseVector {
    const n = this.n;
    const idx = this.touched.slice(0, n);
    const val = new Float32Array(n);
    let norm = 0;
    for (let j = 0; j < n; j++) {
      const count = this.counts[idx[j]];
      const v = count < 256 ? LOG1P[count] : Math.log1p(count);
      val[j] = v;
      norm += v * v;
      this.counts[idx[j]] = 0;
    }
    norm = Math.sqrt(norm) || 1;
    for (let j = 0; j < n; j++) val[j] /= norm;
    this.n = 0;
    return { idx, val };
  }
}
