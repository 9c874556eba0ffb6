import { LoadOnce } from './load-once';
import { leastRecentlyUsed, trimTarget } from './lru';

/**
 * Agreement between the fast classifier and the LLM, per question (the seed: "Once Laya agrees
 * on at least 90% of 30 answers for a question, that question goes to Laya first"). Judged on
 * the recent answers, not all time: a question whose runs change and whose classifier falls
 * behind goes back to the LLM on its own.
 *
 * One guard on top of the seed's rule: the classifier must also have caught at least 90% of
 * the problems the LLM found among those answers. Problems are rare, so a classifier that
 * always says "no" agrees on 90% of answers while missing every problem; sent first, it would
 * silence the question.
 */
export interface AgreementRecord {
  key: string;
  check_id: string;
  /** All answers compared, and those the classifier agreed with. */
  answers: number;
  agreed: number;
  /**
   * The most recent outcomes, oldest first: "a" agreed on no problem, "A" agreed on a problem,
   * "d" the classifier saw a problem the LLM did not, "D" it missed one the LLM found.
   */
  recent: string;
}

export interface AgreementStore {
  load(keys: readonly string[]): Promise<Map<string, AgreementRecord>>;
  save(records: readonly AgreementRecord[]): Promise<void>;
  list?(): Promise<AgreementRecord[]>;
}

export interface AgreementStat {
  question_key: string;
  check_id: string;
  answers: number;
  agreed: number;
  rate: number;
  /** Of the problems the LLM found recently, the share the classifier caught (absent: none found). */
  recall?: number;
  classifier_first: boolean;
}

export interface AgreementOptions {
  store?: AgreementStore;
  minAnswers?: number;
  minRate?: number;
  /** How many recent answers the switch looks at. */
  window?: number;
  /**
   * The records kept in memory at most. Past it the least recently used that are in the store
   * as they are go (read again when their question is next asked); one changed since the last
   * flush stays until it is saved. Without a store the least recently used go as they are.
   */
  maxRecords?: number;
  /** Questions remembered as loaded from the store, with or without a record (LoadOnce). */
  maxLoadedKeys?: number;
}

export const DEFAULT_MAX_AGREEMENT_RECORDS = 10_000;

export const MIN_AGREEMENT_ANSWERS = 30;
export const MIN_AGREEMENT_RATE = 0.9;

function recentRates(r: AgreementRecord): { rate: number; recall?: number } {
  let agreed = 0;
  let caught = 0;
  let missed = 0;
  for (const c of r.recent) {
    if (c === 'a' || c === 'A') agreed++;
    if (c === 'A') caught++;
    else if (c === 'D') missed++;
  }
  return { rate: r.recent.length ? agreed / r.recent.length : 0, recall: caught + missed ? caught / (caught + missed) : undefined };
}

/** The switch: enough recent answers, agreement at the rate, and the problems caught at it too. */
export function goesToClassifierFirst(r: AgreementRecord, minAnswers = MIN_AGREEMENT_ANSWERS, minRate = MIN_AGREEMENT_RATE): boolean {
  if (r.recent.length < minAnswers) return false;
  const { rate, recall } = recentRates(r);
  return rate >= minRate && (recall === undefined || recall >= minRate);
}

/**
 * Which questions go to the fast classifier first, as a process other than the question
 * service sees it (the rule engine's scheduler, whose local-LLM cost control does not apply to
 * them): read from the agreement store, refreshed in the background at most every `refreshMs`.
 * Synchronous for the hot path: until the first read ends, no question is classifier-first.
 */
export class ClassifierFirstView {
  private keys = new Set<string>();
  private at = -Infinity;
  private loading: Promise<void> | undefined;
  private readonly refreshMs: number;
  private readonly now: () => number;

  constructor(
    private readonly list: () => Promise<AgreementRecord[]>,
    private readonly opts: { refreshMs?: number; now?: () => number; onError?: (err: unknown) => void; minAnswers?: number; minRate?: number } = {},
  ) {
    this.refreshMs = opts.refreshMs ?? 30_000;
    this.now = opts.now ?? Date.now;
  }

  /** What the last read said of this question key; starts a read when it is older than refreshMs. */
  has(key: string): boolean {
    if (!this.loading && this.now() - this.at >= this.refreshMs) void this.refresh();
    return this.keys.has(key);
  }

  /** Reads the store now (a failed read keeps what the last one said, and is told to onError). */
  refresh(): Promise<void> {
    this.at = this.now();
    this.loading ??= this.list()
      .then((records) => {
        this.keys = new Set(records.filter((r) => goesToClassifierFirst(r, this.opts.minAnswers, this.opts.minRate)).map((r) => r.key));
      })
      .catch((err) => this.opts.onError?.(err))
      .finally(() => (this.loading = undefined));
    return this.loading;
  }
}

export class AgreementTracker {
  private readonly records = new Map<string, AgreementRecord>();
  /** The tick of each record's last use (leastRecentlyUsed). */
  private readonly used = new Map<string, number>();
  private readonly loaded: LoadOnce;
  private readonly dirty = new Set<string>();
  /** Keys being written (flush), with how many saves of each are under way: not let go until the store has them. */
  private readonly saving = new Map<string, number>();
  private readonly minAnswers: number;
  private readonly minRate: number;
  private readonly window: number;
  private readonly maxRecords: number;
  private tick = 0;

  constructor(private readonly opts: AgreementOptions = {}) {
    this.minAnswers = opts.minAnswers ?? MIN_AGREEMENT_ANSWERS;
    this.minRate = opts.minRate ?? MIN_AGREEMENT_RATE;
    this.window = Math.max(opts.window ?? 100, this.minAnswers);
    this.maxRecords = opts.maxRecords ?? DEFAULT_MAX_AGREEMENT_RECORDS;
    this.loaded = new LoadOnce(opts.maxLoadedKeys);
  }

  /**
   * Loads the stored records of these question keys (once each, and again once let go); call
   * before asking classifierFirst and before record: with a store, an answer of a question not
   * made ready is not recorded, so that a record let go is never replaced by a fresh one.
   */
  async ready(keys: readonly string[]): Promise<void> {
    for (const k of keys) if (this.records.has(k)) this.used.set(k, ++this.tick);
    const store = this.opts.store;
    if (!store) return;
    await this.loaded.ready(keys, async (todo) => {
      const got = await store.load(todo);
      for (const k of todo) {
        const r = got.get(k);
        if (r && !this.records.has(k)) this.hold(k, r);
      }
    });
    // Not those just asked for, whose answers are on their way (over the bound until a flush).
    this.trim(new Set(keys));
  }

  /**
   * ready([key]) at once when there is nothing to wait for (no store, or the key loaded already
   * and the records within their bound, so nothing is let go): undefined then, with its record
   * marked used as ready marks it; else ready's promise. Asked for every task: the fast path
   * makes no arrays and no promises.
   */
  readyNow(key: string): Promise<void> | undefined {
    const store = this.opts.store;
    if (store && (this.records.size > this.maxRecords || !this.loaded.has(key))) return this.ready([key]);
    if (this.records.has(key)) this.used.set(key, ++this.tick);
    if (store) this.loaded.touchLoaded(key);
    return undefined;
  }

  /** The records held in memory, and the keys remembered as loaded. */
  held(): { records: number; loaded: number } {
    return { records: this.records.size, loaded: this.loaded.size };
  }

  private hold(key: string, r: AgreementRecord): void {
    this.records.set(key, r);
    this.used.set(key, ++this.tick);
  }

  /**
   * Lets the least recently used records go while over the bound (down to a tenth under it):
   * those saved (all without a store), but for `keep`.
   */
  private trim(keep?: ReadonlySet<string>): void {
    if (this.records.size <= this.maxRecords) return;
    const store = this.opts.store;
    const over = this.records.size - trimTarget(this.maxRecords);
    for (const k of leastRecentlyUsed(this.used, over, (k) => !keep?.has(k) && (!store || (!this.dirty.has(k) && !this.saving.has(k))))) {
      this.records.delete(k);
      this.used.delete(k);
      this.loaded.forget(k);
    }
  }

  record(key: string, checkId: string, agreed: boolean, llmFlagged = false): void {
    let r = this.records.get(key);
    if (r) this.used.set(key, ++this.tick);
    else {
      // Not made ready (or let go since): the store may hold its record, which a fresh one would overwrite.
      if (this.opts.store && !this.loaded.has(key)) return;
      r = { key, check_id: checkId, answers: 0, agreed: 0, recent: '' };
      this.hold(key, r);
      this.trim(new Set([key]));
    }
    r.answers++;
    if (agreed) r.agreed++;
    r.recent = (r.recent + (agreed ? (llmFlagged ? 'A' : 'a') : llmFlagged ? 'D' : 'd')).slice(-this.window);
    if (this.opts.store) this.dirty.add(key);
  }

  /** Whether the question goes to the fast classifier first. */
  classifierFirst(key: string): boolean {
    const r = this.records.get(key);
    return !!r && goesToClassifierFirst(r, this.minAnswers, this.minRate);
  }

  private recentRates(r: AgreementRecord): { rate: number; recall?: number } {
    return recentRates(r);
  }

  get(key: string): AgreementRecord | undefined {
    return this.records.get(key);
  }

  /**
   * Per question: what Settings → Models shows. The store's records with those held in memory
   * over them (what is held may not be saved yet); none of the store's is kept in memory.
   */
  async stats(checkId?: string): Promise<AgreementStat[]> {
    const all = new Map<string, AgreementRecord>();
    if (this.opts.store?.list) for (const r of await this.opts.store.list()) all.set(r.key, r);
    for (const [k, r] of this.records) all.set(k, r);
    return [...all.values()]
      .filter((r) => !checkId || r.check_id === checkId)
      .map((r) => {
        const recall = this.recentRates(r).recall;
        const stat: AgreementStat = {
          question_key: r.key,
          check_id: r.check_id,
          answers: r.answers,
          agreed: r.agreed,
          rate: r.answers ? Math.round((r.agreed / r.answers) * 1000) / 1000 : 0,
          classifier_first: goesToClassifierFirst(r, this.minAnswers, this.minRate),
        };
        if (recall !== undefined) stat.recall = Math.round(recall * 1000) / 1000;
        return stat;
      })
      .sort((a, b) => (a.question_key < b.question_key ? -1 : 1));
  }

  async flush(): Promise<void> {
    if (!this.opts.store || !this.dirty.size) return;
    const keys = [...this.dirty];
    this.dirty.clear();
    // Copies: a record that changes while the save waits is saved again at the next flush.
    const records = keys.map((k) => ({ ...this.records.get(k)! }));
    for (const k of keys) this.saving.set(k, (this.saving.get(k) ?? 0) + 1);
    try {
      await this.opts.store.save(records);
    } catch (err) {
      for (const k of keys) this.dirty.add(k);
      throw err;
    } finally {
      for (const k of keys) {
        const n = this.saving.get(k)! - 1;
        if (n) this.saving.set(k, n);
        else this.saving.delete(k);
      }
    }
    // Saved: those over the bound may go now.
    this.trim();
  }
}
