import { v1 } from '@neatroots/proto';
import { DEFAULT_SPAN_LIMITS } from './limits';
import { mapEvents } from './mapping';
import { mapOtlpExport } from './otlp';
import { itemToEvent } from './wire';

const span = (o: Partial<v1.Span>): v1.Event => ({ kind: { $case: 'span', value: v1.Span.fromPartial({ run_id: 'r1', type: 'tool', name: 'x', ...o }) } });

describe('mapEvents (neatroots.v1 exports)', () => {
  it('accepts or rejects each event on its own, the rejected ones by position, run, span, field and reason', () => {
    const res = mapEvents([span({ span_id: 'a' }), span({ span_id: 'b', type: 'robot' }), span({ span_id: 'c', input_json: '{' })], { project: 'p' });
    expect(res.received).toBe(3);
    expect(res.accepted).toBe(1);
    expect(res.items.map((i) => (i.kind === 'span' ? i.span.span_id : ''))).toEqual(['a']);
    expect(res.rejected).toEqual([
      { index: 1, run_id: 'r1', span_id: 'b', field: 'type', reason: expect.stringContaining('must be one of') },
      { index: 2, run_id: 'r1', span_id: 'c', field: 'input_json', reason: expect.stringContaining('is not valid JSON') },
    ]);
  });

  it('rejects a run, span, parent or session id of "." or "..", which no link or API path could name', () => {
    const why = (v: string) => `must not be "${v}": in a link or an API path it is a step up, not a name`;
    const res = mapEvents([
      span({ span_id: '...', parent_id: '.a', session_id: '..b' }),
      span({ run_id: '..', span_id: 'a' }),
      span({ span_id: '.' }),
      span({ span_id: 'b', parent_id: '..' }),
      span({ span_id: 'c', session_id: '.' }),
      itemToEvent({ kind: 'run_start', run: { event: 'run_start', run_id: 'r2', session_id: '..' } }),
      itemToEvent({ kind: 'run_end', run: { event: 'run_end', run_id: '.', status: 'ok' } }),
    ]);
    expect(res.items.map((i) => (i.kind === 'span' ? i.span.span_id : i.kind))).toEqual(['...']);
    expect(res.rejected).toEqual([
      { index: 1, field: 'run_id', reason: why('..') },
      { index: 2, run_id: 'r1', field: 'span_id', reason: why('.') },
      { index: 3, run_id: 'r1', span_id: 'b', field: 'parent_id', reason: why('..') },
      { index: 4, run_id: 'r1', span_id: 'c', field: 'session_id', reason: why('.') },
      { index: 5, run_id: 'r2', field: 'session_id', reason: why('..') },
      { index: 6, field: 'run_id', reason: why('.') },
    ]);
  });

  it('stamps the API key\'s project and rejects an item naming another', () => {
    const res = mapEvents(
      [span({ span_id: 'a' }), span({ span_id: 'b', project: 'other' }), itemToEvent({ kind: 'run_start', run: { event: 'run_start', run_id: 'r1' } })],
      { project: 'p' },
    );
    expect(res.items.map((i) => (i.kind === 'run_end' ? undefined : i.kind === 'span' ? i.span.project : i.run.project))).toEqual(['p', 'p']);
    expect(res.rejected).toEqual([{ index: 1, run_id: 'r1', span_id: 'b', field: 'project', reason: 'names project "other", but the API key is for "p"' }]);
  });

  it('names the message\'s field when a limit is passed, as ingest\'s OTLP path does in the same shape', () => {
    const limits = { limits: { ...DEFAULT_SPAN_LIMITS, maxJsonDepth: 2 }, now: Date.now() };
    const res = mapEvents([span({ span_id: 'a', input_json: '[[[1]]]' })], { limits });
    expect(res.rejected).toEqual([{ index: 0, run_id: 'r1', span_id: 'a', field: 'input_json', reason: expect.any(String) }]);
    const otlp = mapOtlpExport({ resource_spans: [] });
    expect(otlp).toEqual({ items: [], itemIndexes: [], received: 0, spans: 0, accepted: 0, rejected: [] });
  });
});
