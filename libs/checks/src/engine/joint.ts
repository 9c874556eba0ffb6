import RE2 from 're2';
import type { TextMatcher } from './compile';

type PatternSet = InstanceType<typeof RE2.Set>;

/** The largest pattern that joins a pass (DEFAULT_PATTERN_BOUNDS.maxProgram), and the largest pass, in instructions. */
const JOINT_MAX_SIZE = 2000;
const JOINT_MAX_UNITS = 10_000;

/**
 * The `match` patterns that read the same text of a span, tested in one pass (RE2.Set: one
 * automaton for all of them), then, only when that pass hits, which of them did. Most spans
 * match none, so most spans cost one pass however many `match` checks apply.
 *
 * A pass gives the same answers as testing each pattern alone, within its bounds: the user's
 * patterns join it only while the text is cheap enough for every pattern in the pass to run
 * inline (JointPattern.budget, the bound each pattern keeps alone); past it, or for a
 * pattern switched off, or if RE2 gives up, each pattern is tested alone as before.
 */
export class JointMatch {
  /** Member i's position in the set, or -1 when it is tested alone. */
  private readonly position: Int32Array;
  /** After a pass that hit: 1 for the members whose pattern matched. */
  readonly hits: Uint8Array;
  private set: PatternSet | undefined;
  private units = 0;
  private budget = Infinity;
  private liveMask = '';

  constructor(readonly members: readonly TextMatcher[]) {
    this.position = new Int32Array(members.length).fill(-1);
    this.hits = new Uint8Array(members.length);
    this.build();
  }

  /** Member i was in the last pass (its answer is hits[i]); otherwise it is tested alone. */
  covers(i: number): boolean {
    return this.position[i] >= 0;
  }

  /**
   * One pass over `text`: false when there is none (too long for the budget, RE2 gave up),
   * and then every member is tested alone.
   */
  run(text: Buffer): boolean {
    if (this.changed()) this.build();
    const set = this.set;
    if (!set || text.length * this.units > this.budget) return false;
    this.hits.fill(0);
    try {
      if (!set.test(text)) return true;
      for (const at of set.match(text)) {
        for (let i = 0; i < this.position.length; i++) if (this.position[i] === at) this.hits[i] = 1;
      }
      return true;
    } catch {
      // Out of memory in the automaton: the patterns alone fall back to RE2's other engines.
      return false;
    }
  }

  /** A member switched off or on since the set was built (rare: a pattern disabled for being slow). */
  private changed(): boolean {
    const ms = this.members;
    for (let i = 0; i < ms.length; i++) {
      const j = ms[i].joint;
      if (j && (j.live() ? '1' : '0') !== this.liveMask[i]) return true;
    }
    return false;
  }

  private build(): void {
    const sources: string[] = [];
    let mask = '';
    this.units = 0;
    this.budget = Infinity;
    this.position.fill(-1);
    this.members.forEach((m, i) => {
      const j = m.joint;
      const live = !!j && j.live();
      mask += live ? '1' : '0';
      // Compiling the set runs on the event loop: only patterns within the usual bounds, and
      // a pass of bounded size (a pattern loaded with lifted bounds is tested alone).
      if (!j || !live || j.size > JOINT_MAX_SIZE || this.units + j.size > JOINT_MAX_UNITS) return;
      this.position[i] = sources.length;
      sources.push(j.source);
      this.units += j.size;
      this.budget = Math.min(this.budget, j.budget);
    });
    this.liveMask = mask;
    this.set = undefined;
    if (sources.length < 2) {
      this.position.fill(-1);
      return;
    }
    try {
      this.set = new RE2.Set(sources);
    } catch {
      // A pattern RE2.Set will not take: each is tested alone.
      this.position.fill(-1);
    }
  }
}
