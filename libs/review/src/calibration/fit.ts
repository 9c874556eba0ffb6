/**
 * Fitting one question's review band to its labels. A band [no, yes, decide] reads a
 * decision's probability of yes (p): p <= no is a sure no, p >= yes a sure yes, in between the
 * answer is unsure and the reasoning model looks again. A sure answer that a reviewer later
 * judged wrong is what a wider band would have sent to review.
 *
 * A label is put right by a band when the band is sure of a right answer, or unsure of a wrong
 * one; the score is the share put right. The fit moves only the end of the band the question's
 * findings were answered at (a "no" for steps and warning signs' actions, a "yes" for never
 * rules), and only outward: the band is widened, never narrowed. Of the widenings that put the
 * most labels right, it takes the smallest (every answer it makes unsure costs a review); the
 * new end falls halfway between the last answer it keeps sure and the first it sends to review.
 */
export type Band = readonly [no: number, yes: number, decide: number];

export interface Point {
  session_id: string;
  /** The decision's probability of yes, as the check kept it. */
  p: number;
  /** The reviewer's label: the checker got it right. */
  correct: boolean;
}

export function isSure(p: number, [no, yes]: Band): boolean {
  return p <= no || p >= yes;
}

/** Labels the band puts right: sure of a right answer, or unsure of a wrong one. */
export function putRight(points: readonly Point[], band: Band): number {
  return points.filter((pt) => isSure(pt.p, band) === pt.correct).length;
}

/** A point between u (kept sure) and v (sent to review): u <= t < v, rounded to 3 places when that stays between. */
function cut(u: number, v: number): number {
  const mid = (u + v) / 2;
  const r = Math.round(mid * 1000) / 1000;
  return r >= u && r < v ? r : mid;
}

/** Widens `no` (the sure-no end) to the best cut, or keeps the band. */
function widenNo(points: readonly Point[], band: Band): Band {
  const [no, yes, decide] = band;
  const sureNo = points.filter((pt) => pt.p <= no);
  if (!sureNo.some((pt) => !pt.correct)) return band;
  const values = [...new Set(sureNo.map((pt) => pt.p))].sort((a, b) => a - b);
  let best = { gain: 0, no };
  // from the smallest widening to the largest: a later one must do strictly better to win
  for (let i = values.length - 1; i >= 0; i--) {
    const lower = i > 0 ? values[i - 1] : 0;
    if (values[i] <= lower) continue; // p = 0 is sure however wide the band
    const caught = sureNo.filter((pt) => pt.p >= values[i]);
    const gain = caught.reduce((g, pt) => g + (pt.correct ? -1 : 1), 0);
    if (gain > best.gain) best = { gain, no: cut(lower, values[i]) };
  }
  return best.no === no ? band : [best.no, yes, decide];
}

const mirrorBand = ([no, yes, decide]: Band): Band => [1 - yes, 1 - no, 1 - decide];
const round = (x: number) => Math.round(x * 1e9) / 1e9;

/** The band widened at `side` to fit the points (the same band when nothing is gained). */
export function widen(points: readonly Point[], band: Band, side: 'no' | 'yes'): Band {
  if (side === 'no') return widenNo(points, band);
  // The yes end is the no end of the mirrored question (p -> 1 - p).
  const mirrored = mirrorBand(band);
  const fitted = widenNo(points.map((pt) => ({ ...pt, p: 1 - pt.p })), mirrored);
  if (fitted === mirrored) return band;
  // Rounded (1 - x is rarely a short decimal) only when that is sure of the same answers: next
  // to p = 1 rounding can move the end past the answers the fit kept sure.
  const yes = 1 - fitted[0];
  const r = round(yes);
  const same = points.every((pt) => pt.p >= r === pt.p >= yes);
  return [band[0], same ? r : yes, band[2]];
}

/**
 * The fit checked on sessions it was not fitted on: each labeled session in turn is left out,
 * the band fitted on the others, and the left-out session's labels scored with it. The gain
 * over the current band, summed: a widening that only fits the one session it came from
 * gains nothing here.
 */
export function heldOutGain(points: readonly Point[], band: Band, side: 'no' | 'yes'): number {
  const sessions = [...new Set(points.map((pt) => pt.session_id))];
  let gain = 0;
  for (const s of sessions) {
    const left = points.filter((pt) => pt.session_id === s);
    const fitted = widen(points.filter((pt) => pt.session_id !== s), band, side);
    gain += putRight(left, fitted) - putRight(left, band);
  }
  return gain;
}
