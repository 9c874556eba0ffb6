/** Time as the pipeline sees it: the wall clock live, the recorded clock in replay. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
