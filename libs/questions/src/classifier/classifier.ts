import { LoadOnce } from '../load-once';
import { leastRecentlyUsed } from '../lru';
import { judge, notChecked, questionKey, rawFromClasses, targetOf, toAnswer, type QuestionDef, type RawAnswer } from '../judge';
import type { Answer, EvidenceDoc } from '../types';
import { Featurizer, Section, type SparseVector } from './features';
import { foldedAsk, HEURISTIC_ASKS, HEURISTICS } from './heuristics';
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
  /**
   * The models kept in memory at most, in bytes of their weights (a yes_no question's is 256 KB,
   * a choice or score question's that times its labels or levels). Past it the least recently
   * used models that are in the store as they are go (read again when their question is next
   * asked); one that learnt since the last flush stays until it is saved. Without a store
   * nothing is ever saved, and the least recently used go as they are.
   */
  maxModelBytes?: number;
  /** Questions remembered as loaded from the store, with or without a model (LoadOnce). */
  maxLoadedKeys?: number;
}

export const DEFAULT_MIN_TRAINED = 20;
export const DEFAULT_MIN_PER_CLASS = 5;
/** About 256 yes_no questions' models. */
export const DEFAULT_MAX_MODEL_BYTES = 64 * 1024 * 1024;

interface Entry {
  model: LogisticModel;
  check_id: string;
  dirty: boolean;
  /** Saves of it under way (flush): not let go until the store has it. */
  saving?: number;
  /** The tick of its last use (leastRecentlyUsed). */
  used: number;
}

function bytesOf(m: LogisticModel): number {
  return m.w.byteLength + m.b.byteLength;
}

/** Whether `q` asks what the library question of its id asks (as written: before `{task}` and the like are filled). */
const libraryWording = new WeakMap<QuestionDef, boolean>();
function asksAsLibrary(q: QuestionDef): boolean {
  let same = libraryWording.get(q);
  if (same === undefined) {
    const ask = HEURISTIC_ASKS[q.id];
    same = ask !== undefined && foldedAsk(q.ask_as_written ?? q.ask) === ask;
    libraryWording.set(q, same);
  }
  return same;
}

export class FastClassifier {
  private readonly models = new Map<string, Entry>();
  private readonly loaded: LoadOnce;
  private readonly featurizer = new Featurizer();
  private readonly minTrained: number;
  private readonly minPerClass: number;
  private readonly maxBytes: number;
  /** The bytes of the models held. */
  private bytes = 0;
  private tick = 0;

  constructor(private readonly opts: FastClassifierOptions = {}) {
    this.minTrained = opts.minTrained ?? DEFAULT_MIN_TRAINED;
    this.minPerClass = opts.minPerClass ?? DEFAULT_MIN_PER_CLASS;
    this.maxBytes = opts.maxModelBytes ?? DEFAULT_MAX_MODEL_BYTES;
    this.loaded = new LoadOnce(opts.maxLoadedKeys);
  }

  /**
   * Loads the persisted models of these questions (once each, and again once let go); call
   * before answering them and before teaching them: a question not made ready learns nothing
   * (with a store), so that a model let go is never replaced by a fresh one.
   */
  async ready(questions: readonly QuestionDef[]): Promise<void> {
    const keys = questions.map(questionKey);
    // Those held are in use again: not the first to go while their answer is on its way.
    for (const k of keys) this.touch(k);
    const store = this.opts.store;
    if (!store) return;
    await this.loaded.ready(keys, async (todo) => {
      const saved = await store.load(todo);
      for (const k of todo) {
        const s = saved.get(k);
        if (s && !this.models.has(k)) this.hold(k, { model: LogisticModel.load(s), check_id: k.split('@')[0], dirty: false, used: 0 });
      }
    });
    // Once the keys count as loaded: one let go now is forgotten, and loaded again when asked.
    // Not those just asked for, whose answers are on their way (over the bound until a flush).
    this.trim(new Set(keys));
  }

  /**
   * ready([q]) at once when there is nothing to wait for (no store, or the question loaded
   * already and the models within their bound, so nothing is let go): undefined then, with the
   * question's model marked used as ready marks it; else ready's promise. Asked for every task:
   * the fast path makes no arrays and no promises.
   */
  readyNow(q: QuestionDef): Promise<void> | undefined {
    const key = questionKey(q);
    if (!this.opts.store) {
      this.touch(key);
      return undefined;
    }
    if (this.bytes > this.maxBytes || !this.loaded.has(key)) return this.ready([q]);
    this.touch(key);
    this.loaded.touchLoaded(key);
    return undefined;
  }

  /** What it holds in memory: models, their bytes, and the questions remembered as loaded. */
  held(): { models: number; bytes: number; loaded: number } {
    return { models: this.models.size, bytes: this.bytes, loaded: this.loaded.size };
  }

  /** Whether the model under this key is in memory. */
  holds(key: string): boolean {
    return this.models.has(key);
  }

  /** In the store as it is in memory. */
  private saved(e: Entry): boolean {
    return !e.dirty && !e.saving;
  }

  private touch(key: string): Entry | undefined {
    const e = this.models.get(key);
    if (e) e.used = ++this.tick;
    return e;
  }

  private hold(key: string, e: Entry): void {
    e.used = ++this.tick;
    this.models.set(key, e);
    this.bytes += bytesOf(e.model);
  }

  /**
   * Lets the least recently used models go while over the bound: those saved (all without a
   * store), but for `keep`. A model is 256 KB or more, and one comes in only for a question
   * asked for the first time or again after it went: the bound is kept exactly.
   */
  private trim(keep?: ReadonlySet<string>): void {
    if (this.bytes <= this.maxBytes) return;
    const store = this.opts.store;
    const entries = (function* (models: Map<string, Entry>) {
      for (const [k, e] of models) yield [k, e.used] as const;
    })(this.models);
    // How many to let go is not known from a count (models differ in size): the candidates in order.
    for (const k of leastRecentlyUsed(entries, this.models.size, (k) => !keep?.has(k) && (!store || this.saved(this.models.get(k)!)))) {
      if (this.bytes <= this.maxBytes) break;
      const e = this.models.get(k)!;
      this.models.delete(k);
      this.bytes -= bytesOf(e.model);
      this.loaded.forget(k);
    }
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
    const entry = this.touch(key);
    if (entry && entry.model.n >= this.minTrained && entry.model.knowsBoth(this.minPerClass)) {
      const vec = x ?? this.vector(doc);
      const raw = rawFromClasses(q, entry.model.predict(vec));
      const v = judge(q, raw, false);
      return toAnswer(v, 'classifier', v.flagged ? this.quote(entry.model, q, doc) : undefined);
    }
    // The library's questions; a database check reusing a library id only while it asks the library's words.
    const h = q.source === 'library' || (q.source === 'database' && asksAsLibrary(q)) ? HEURISTICS[q.id] : undefined;
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
    let entry = this.touch(key);
    if (!entry) {
      // Not made ready (or let go since): the store may hold its model, which a fresh one would overwrite.
      if (this.opts.store && !this.loaded.has(key)) return;
      entry = { model: new LogisticModel(q.kind === 'yes_no' ? 1 : y.length), check_id: q.id, dirty: true, used: 0 };
      this.hold(key, entry);
      this.trim(new Set([key]));
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
    for (const [, e] of dirty) {
      e.dirty = false;
      e.saving = (e.saving ?? 0) + 1;
    }
    try {
      await this.opts.store.save(dirty.map(([key, e]) => ({ key, check_id: e.check_id, model: e.model.save() })));
    } catch (err) {
      for (const [, e] of dirty) e.dirty = true;
      throw err;
    } finally {
      for (const [, e] of dirty) e.saving!--;
    }
    // Saved: those over the bound may go now.
    this.trim();
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
