import type { Envelope } from '@neatroots/spans';
import { compileRuleSet } from './ruleset';
import { parseCheck } from '../schema';

/**
 * A rule set of one rule for the pipeline's own tests (the rule engine over a bus and a window
 * journal): a run that drops a table twice raises `dropped-table`.
 */
export const droppedTableRules = () =>
  compileRuleSet(
    [parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 2 } }, 'mine.yaml', 'user')],
    () => ({ test: () => false }),
  );

/** A drop_table span of `run`, as ingest puts it on the events topic. */
export const dropTable = (run: string, id: string): { key: string; value: Envelope } => ({
  key: run,
  value: { project: 'p', received_ms: 1_000, item: { kind: 'span', span: { run_id: run, span_id: id, type: 'tool', name: 'drop_table', tool: 'drop_table', status: 'ok', start_ms: 1_000, end_ms: 1_000 } } },
});
