import { LoadOnce } from './load-once';

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
}

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
  private readonly loaded = new LoadOnce();
  private readonly dirty = new Set<string>();
  private readonly minAnswers: number;
  private readonly minRate: number;
  private readonly window: number;

  constructor(private readonly opts: AgreementOptions = {}) {
    this.minAnswers = opts.minAnswers ?? MIN_AGREEMENT_ANSWERS;
    this.minRate = opts.minRate ?? MIN_AGREEMENT_RATE;
    this.window = Math.max(opts.window ?? 100, this.minAnswers);
  }

  async ready(keys: readonly string[]): Promise<void> {
    const store = this.opts.store;
    if (!store) return;
    await this.loaded.ready(keys, async (todo) => {
      const got = await store.load(todo);
      for (const k of todo) {
        const r = got.get(k);
        if (r && !this.records.has(k)) this.records.set(k, r);
      }
    });
  }

  record(key: string, checkId: string, agreed: boolean, llmFlagged = false): void {
    let r = this.records.get(key);
    if (!r) {
      r = { key, check_id: checkId, answers: 0, agreed: 0, recent: '' };
      this.records.set(key, r);
    }
    r.answers++;
    if (agreed) r.agreed++;
    r.recent = (r.recent + (agreed ? (llmFlagged ? 'A' : 'a') : llmFlagged ? 'D' : 'd')).slice(-this.window);
    this.dirty.add(key);
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

  /** Per question: what Settings → Models shows. */
  async stats(checkId?: string): Promise<AgreementStat[]> {
    if (this.opts.store?.list) {
      for (const r of await this.opts.store.list()) if (!this.records.has(r.key)) this.records.set(r.key, r);
    }
    return [...this.records.values()]
      .filter((r) => !checkId || r.check_id === checkId)
      .map((r) => {
        const recall = this.recentRates(r).recall;
        const stat: AgreementStat = {
          question_key: r.key,
          check_id: r.check_id,
          answers: r.answers,
          agreed: r.agreed,
          rate: r.answers ? Math.round((r.agreed / r.answers) * 1000) / 1000 : 0,
          classifier_first: this.classifierFirst(r.key),
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
    try {
      await this.opts.store.save(keys.map((k) => this.records.get(k)!));
    } catch (err) {
      for (const k of keys) this.dirty.add(k);
      throw err;
    }
  }
}
