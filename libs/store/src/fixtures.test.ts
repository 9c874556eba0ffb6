/** Builders for the store's specs. A helper (*.test.ts), not a suite. */
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope, RunEnd, RunStart, Span } from '@neatroots/spans';

export const T0 = Date.parse('2025-01-01T00:00:00.000Z');

export function spanEnv(project: string, span: Partial<Span> & { run_id: string; span_id: string }, received_ms = T0): Envelope {
  const full: Span = { type: 'tool', name: span.tool ?? 'search', status: 'ok', ...span };
  return { project, received_ms, item: { kind: 'span', span: full } };
}

export function startEnv(project: string, run: Omit<RunStart, 'event'>, received_ms = T0): Envelope {
  return { project, received_ms, item: { kind: 'run_start', run: { event: 'run_start', ...run } } };
}

export function endEnv(project: string, run: Omit<RunEnd, 'event'>, received_ms = T0): Envelope {
  return { project, received_ms, item: { kind: 'run_end', run: { event: 'run_end', ...run } } };
}

export function finding(over: Partial<FindingMessage> & { id: string }): FindingMessage {
  return {
    check_id: 'repeated-tool-call',
    run_id: 'r1',
    project: 'p1',
    status: 'raised',
    span_ids: ['s1', 's2', 's3'],
    count: 3,
    action: 'flag',
    title: 'Same tool called repeatedly',
    guidance: 'You have called search 3 times',
    at_ms: T0 + 1000,
    priority: 0,
    kind: 'rule',
    source: 'library',
    ...over,
  };
}
