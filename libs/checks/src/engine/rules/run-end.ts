import type { RuleKind } from './kind';

/** `run_end`: the run ended in one of `ends` (error, timeout, cancelled...). */
export const runEnd: RuleKind<'run_end'> = {
  type: 'run_end',
  priority: 40,
  onRunEnd(x, w, r, run, _view, received) {
    if (r.rule.ends.includes(run.status)) x.raise(w, r, 'run', [], 1, received, received, { name: run.status });
  },
};
