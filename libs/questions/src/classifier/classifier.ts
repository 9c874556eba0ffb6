import { LoadOnce } from '../load-once';
import { judge, notChecked, questionKey, rawFromClasses, targetOf, toAnswer, type QuestionDef, type RawAnswer } from '../judge';
import type { Answer, EvidenceDoc } from '../types';
import { Featurizer, Section, type SparseVector } from './features';
import { HEURISTICS } from './heuristics';
import { LogisticModel, type SavedModel } from './model';

/**
 * The fast classifier (the seed's Laya): a logistic regression per question over hashed word
 * n-grams of the evidence, trained online from the LLM's answers and persisted. Before a
 * question has enough answers, the library's questions are answered by built-in heuristics;
 * other questions are "not checked" (never a silent pass).
 */
export interface ClassifierStore {
  load(keys: readonly string[]): Promise<Map<string, SavedModel>>;
  save(models: readonly { key: string; check_id: string; model: SavedModel }[]): Promise<void>;
}

export interface FastClassifierOptions {
  store?: ClassifierStore;
  /** Answers a model must have learnt from before it answers instead of the heuristics. */
  minTrained?: number;
  /**
   * Answers of each of two outcomes it must have seen (yes and no, or two labels or levels):
   * a model trained only on passes would pass everything, and agree with the LLM while it did.
   */
  minPerClass?: number;
}

export const DEFAULT_MIN_TRAINED = 20;
export const DEFAULT_MIN_PER_CLASS = 5;

interface Entry {
  model: LogisticModel;
  check_id: string;
  dirty: boolean;
}

export class FastClassifier {
  private readonly models = new Map<string, Entry>();
  private readonly loaded = new LoadOnce();
  private readonly featurizer = new Featurizer();
  private readonly minTrained: number;
  private readonly minPerClass: number;

  constructor(private readonly opts: FastClassifierOptions = {}) {
    this.minTrained = opts.minTrained ?? DEFAULT_MIN_TRAINED;
    this.minPerClass = opts.minPerClass ?? DEFAULT_MIN_PER_CLASS;
  }

  /** Loads the persisted models of these questions (once each); call before answering them. */
  async ready(questions: readonly QuestionDef[]): Promise<void> {
    const store = this.opts.store;
    if (!store) return;
    await this.loaded.ready(questions.map(questionKey), async (keys) => {
      const saved = await store.load(keys);
      for (const k of keys) {
        const s = saved.get(k);
        if (s && !this.models.has(k)) this.models.set(k, { model: LogisticModel.load(s), check_id: k.split('@')[0], dirty: false });
      }
    });
  }

  vector(doc: EvidenceDoc): SparseVector {
    return this.featurizer.vector(doc);
  }

  /** Examples the question's model has learnt from. */
  trained(q: QuestionDef): number {
    return this.models.get(questionKey(q))?.model.n ?? 0;
  }

  trainedByKey(key: string): number {
    return this.models.get(key)?.model.n ?? 0;
  }

  /** Synchronous and allocation-light: this is the path that must stay well under a millisecond. */
  answer(q: QuestionDef, doc: EvidenceDoc, x?: SparseVector): Answer {
    const key = questionKey(q);
    const entry = this.models.get(key);
    if (entry && entry.model.n >= this.minTrained && entry.model.knowsBoth(this.minPerClass)) {
      const vec = x ?? this.vector(doc);
      const raw = rawFromClasses(q, entry.model.predict(vec));
      const v = judge(q, raw, false);
      return toAnswer(v, 'classifier', v.flagged ? this.quote(entry.model, q, doc) : undefined);
    }
    const h = q.source === 'library' || q.source === 'database' ? HEURISTICS[q.id] : undefined;
    if (h && q.kind === 'yes_no') {
      const r = h(doc);
      const v = judge(q, { p: r.p }, false);
      return toAnswer(v, 'classifier', v.flagged ? r.quote : undefined);
    }
    return notChecked('the fast classifier has not learnt this question yet');
  }

  /** Learns from an LLM's answer (its uncapped probabilities). */
  learn(q: QuestionDef, doc: EvidenceDoc, raw: RawAnswer, x?: SparseVector): void {
    const y = targetOf(q, raw);
    if (!y) return;
    const key = questionKey(q);
    let entry = this.models.get(key);
    if (!entry) {
      entry = { model: new LogisticModel(q.kind === 'yes_no' ? 1 : y.length), check_id: q.id, dirty: true };
      this.models.set(key, entry);
    }
    if (entry.model.k !== y.length) return;
    entry.model.learn(x ?? this.vector(doc), y);
    entry.dirty = true;
  }

  /** Writes the models that learnt something since the last flush. */
  async flush(): Promise<void> {
    if (!this.opts.store) return;
    const dirty = [...this.models.entries()].filter(([, e]) => e.dirty);
    if (!dirty.length) return;
    for (const [, e] of dirty) e.dirty = false;
    try {
      await this.opts.store.save(dirty.map(([key, e]) => ({ key, check_id: e.check_id, model: e.model.save() })));
    } catch (err) {
      for (const [, e] of dirty) e.dirty = true;
      throw err;
    }
  }

  /**
   * The words that weigh most toward "problem": the sentence of the answer or of a tool's
   * result that the model scores highest. It is taken from the evidence, so it passes the
   * quote check by construction; the check still guards against a bug here.
   */
  private quote(model: LogisticModel, q: QuestionDef, doc: EvidenceDoc): string | undefined {
    const candidates: { text: string; section: number }[] = [];
    const split = (text: string | undefined, section: number) => {
      if (!text) return;
      let start = 0;
      for (let i = 0; i <= text.length && candidates.length < 200; i++) {
        const c = text.charCodeAt(i);
        const end = i === text.length || c === 10 || ((c === 46 || c === 33 || c === 63) && (i + 1 === text.length || text.charCodeAt(i + 1) === 32));
        if (!end) continue;
        const piece = text.slice(start, Math.min(i + 1, text.length)).trim();
        if (piece.length >= 8) candidates.push({ text: piece.slice(0, 200), section });
        start = i + 1;
      }
    };
    split(doc.final_output, Section.Final);
    for (const s of doc.spans) {
      const focus = s.id === doc.focus;
      split(s.output, focus ? Section.FocusOutput : Section.ToolOutput);
      split(s.error, Section.Error);
      // What was sent matters for the call being judged; for the others their results do.
      if (focus) split(s.input, Section.FocusInput);
    }
    const problemClass = q.kind === 'choice' ? Object.keys(q.options ?? {}).indexOf(q.flag_on?.[0] ?? '') : q.kind === 'score' ? model.k - 1 : 0;
    let best: string | undefined;
    let bestScore = -Infinity;
    const k = model.k;
    const cls = Math.max(0, problemClass);
    const weight = (bucket: number) => model.w[bucket * k + cls];
    for (const c of candidates) {
      const s = this.featurizer.textScore(c.text, c.section, weight);
      if (s > bestScore) {
        bestScore = s;
        best = c.text;
      }
    }
    return best;
  }
}
