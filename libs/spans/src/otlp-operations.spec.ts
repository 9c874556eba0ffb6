import { otlp } from '@neatroots/proto';
import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, spansOf } from './otlp-fixtures.test';
import type { RunStart, StreamItem } from './types';

/**
 * The GenAI operations newer than the first conventions: `retrieval` (a search of a data source)
 * is a retrieval span, `invoke_workflow` (the span around a multi-agent workflow) an agent span,
 * and `gen_ai.workflow.name` names the run's workflow.
 */

const TRACE = '0af7651916cd43dd8448eb211c80319c';

const span = (id: string, attrs: Record<string, string>, parent?: string): otlp.Span =>
  otlpSpan({ trace: TRACE, id, parent, name: attrs['gen_ai.operation.name'] ?? 'span', attrs });

const mapped = (spans: otlp.Span[], service = 'support-svc'): StreamItem[] => mapOtlpExport(exportOf(spans, service)).items;

const WORKFLOW = '1111111111111111';
const AGENT = '2222222222222222';
const TOOL = '3333333333333333';

describe('mapOtlpExport: retrieval, invoke_workflow and gen_ai.workflow.name', () => {
  it('maps gen_ai.operation.name retrieval to a retrieval span and invoke_workflow to an agent span', () => {
    const items = mapped([
      span(TOOL, { 'gen_ai.operation.name': 'retrieval', 'gen_ai.data_source.id': 'kb1', 'gen_ai.retrieval.query.text': 'refund policy' }),
      span(WORKFLOW, { 'gen_ai.operation.name': 'invoke_workflow' }),
    ]);
    const [retrieval, workflow] = spansOf(items);
    expect(retrieval).toMatchObject({ type: 'retrieval', name: 'retrieval' });
    // Its attributes are kept as given.
    expect(retrieval.attributes).toMatchObject({ 'gen_ai.data_source.id': 'kb1', 'gen_ai.retrieval.query.text': 'refund policy' });
    expect(workflow.type).toBe('agent');
  });

  it("names the run's workflow from gen_ai.workflow.name, before the agents' names and service.name", () => {
    const items = mapped([
      span(TOOL, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'refund' }, AGENT),
      span(AGENT, { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'refund-agent' }, WORKFLOW),
      span(WORKFLOW, {
        'gen_ai.operation.name': 'invoke_workflow',
        'gen_ai.workflow.name': 'support-pipeline',
        'gen_ai.input.messages': JSON.stringify([{ role: 'user', content: 'Refund order 7' }]),
      }),
    ]);
    expect(spansOf(items).map((s) => s.workflow)).toEqual(['support-pipeline', 'support-pipeline', 'support-pipeline']);
    const start = items.find((i): i is { kind: 'run_start'; run: RunStart } => i.kind === 'run_start')?.run;
    expect(start).toMatchObject({ workflow: 'support-pipeline', user_message: 'Refund order 7' });
    // The attribute stays on its span, as gen_ai.agent.name does.
    expect(spansOf(items)[2].attributes).toMatchObject({ 'gen_ai.workflow.name': 'support-pipeline' });
  });

  it('takes gen_ai.workflow.name from any span of the run when its top does not carry it, and neatroots.workflow before it', () => {
    const items = mapped([
      span(TOOL, { 'gen_ai.operation.name': 'chat', 'gen_ai.workflow.name': 'support-pipeline' }, AGENT),
      span(AGENT, { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'refund-agent', 'gen_ai.input.messages': '"Refund order 7"' }),
    ]);
    expect(spansOf(items).map((s) => s.workflow)).toEqual(['support-pipeline', 'support-pipeline']);
    expect(items[0]).toMatchObject({ kind: 'run_start', run: { workflow: 'support-pipeline' } });
    const explicit = mapped([span(AGENT, { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.workflow.name': 'support-pipeline', 'neatroots.workflow': 'refunds' })]);
    expect(spansOf(explicit)[0].workflow).toBe('refunds');
  });
});
