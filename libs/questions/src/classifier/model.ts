import { DIMS, type SparseVector } from './features';

/**
 * Logistic regression over hashed features, trained online by stochastic gradient descent
 * from the LLM's answers. yes_no has one output (a sigmoid); choice and score have one per
 * label or level (a softmax). Targets are the LLM's probabilities, not a hard label: a 0.6
 * answer teaches "unsure", which is what it was.
 */
export interface SavedModel {
  v: 1;
  /** Outputs: 1 for yes_no, else the number of labels or levels. */
  k: number;
  dims: number;
  /** Examples trained on. */
  n: number;
  /** Examples per class (the class the target leaned to; yes_no: [no, yes]). */
  c?: number[];
  b: number[];
  /** Non-zero weights: base64 of Int32Array (index*k+class) and Float32Array (value). */
  wi: string;
  wv: string;
}

const L2 = 1e-6;
const REPLAY = 64;

export class LogisticModel {
  readonly w: Float32Array;
  readonly b: Float64Array;
  n = 0;
  /** Examples per class (yes_no: no, yes): a model that never saw a problem cannot find one. */
  readonly seen: number[];
  private readonly replay: { x: SparseVector; y: number[] }[] = [];
  private seed = 0x2545f491;

  constructor(readonly k: number) {
    this.w = new Float32Array(DIMS * k);
    this.b = new Float64Array(k);
    this.seen = new Array(k === 1 ? 2 : k).fill(0);
  }

  /** Whether it has seen at least `min` examples of at least two classes (for yes_no: both). */
  knowsBoth(min: number): boolean {
    return this.seen.filter((n) => n >= min).length >= 2;
  }

  /** The probability of each output (k = 1: of yes). */
  predict(x: SparseVector): number[] {
    const k = this.k;
    const { idx, val } = x;
    if (k === 1) {
      let z = this.b[0];
      for (let j = 0; j < idx.length; j++) z += this.w[idx[j]] * val[j];
      return [sigmoid(z)];
    }
    const z = Array.from(this.b);
    for (let j = 0; j < idx.length; j++) {
      const base = idx[j] * k;
      const v = val[j];
      for (let c = 0; c < k; c++) z[c] += this.w[base + c] * v;
    }
    return softmax(z);
  }

  /** One example, plus a couple replayed from recent ones so few answers still teach. */
  learn(x: SparseVector, y: number[]): void {
    this.n++;
    if (this.k === 1) this.seen[y[0] >= 0.5 ? 1 : 0]++;
    else this.seen[y.indexOf(Math.max(...y))]++;
    const lr = 0.8 / Math.sqrt(1 + this.n / 50);
    this.step(x, y, lr);
    for (let r = 0; r < 2 && this.replay.length > 0; r++) {
      const e = this.replay[this.rand() % this.replay.length];
      this.step(e.x, e.y, lr * 0.5);
    }
    if (this.replay.length < REPLAY) this.replay.push({ x, y });
    else this.replay[this.rand() % REPLAY] = { x, y };
  }

  private step(x: SparseVector, y: number[], lr: number): void {
    const p = this.predict(x);
    const k = this.k;
    for (let c = 0; c < k; c++) {
      const g = p[c] - (y[c] ?? 0);
      this.b[c] -= lr * g;
      for (let j = 0; j < x.idx.length; j++) {
        const i = x.idx[j] * k + c;
        this.w[i] -= lr * (g * x.val[j] + L2 * this.w[i]);
      }
    }
  }

  private rand(): number {
    // xorshift32: deterministic, so a replay trains the same model every time.
    let s = this.seed;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.seed = s >>> 0;
    return this.seed;
  }

  save(): SavedModel {
    const idx: number[] = [];
    const val: number[] = [];
    for (let i = 0; i < this.w.length; i++) {
      if (this.w[i] !== 0) {
        idx.push(i);
        val.push(this.w[i]);
      }
    }
    return {
      v: 1,
      k: this.k,
      dims: DIMS,
      n: this.n,
      c: [...this.seen],
      b: Array.from(this.b),
      wi: Buffer.from(new Int32Array(idx).buffer).toString('base64'),
      wv: Buffer.from(new Float32Array(val).buffer).toString('base64'),
    };
  }

  static load(s: SavedModel): LogisticModel {
    if (s.v !== 1 || s.dims !== DIMS) throw new Error(`classifier model: unsupported format (v${s.v}, ${s.dims} dims)`);
    const m = new LogisticModel(s.k);
    m.n = s.n;
    s.c?.forEach((v, i) => (m.seen[i] = v));
    s.b.forEach((v, i) => (m.b[i] = v));
    const ib = Buffer.from(s.wi, 'base64');
    const vb = Buffer.from(s.wv, 'base64');
    const idx = new Int32Array(ib.buffer.slice(ib.byteOffset, ib.byteOffset + ib.byteLength));
    const val = new Float32Array(vb.buffer.slice(vb.byteOffset, vb.byteOffset + vb.byteLength));
    for (let j = 0; j < idx.length; j++) m.w[idx[j]] = val[j];
    return m;
  }
}

function sigmoid(z: number): number {
  return z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z));
}

function softmax(z: number[]): number[] {
  const max = Math.max(...z);
  const e = z.map((v) => Math.exp(v - max));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}
