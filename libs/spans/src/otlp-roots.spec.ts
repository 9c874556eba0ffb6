import { otlp } from '@neatroots/proto';
import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, runEnds, runStarts, spansOf, type SpanSpec } from './otlp-fixtures.test';
import type { StreamItem } from './types';

/**
 * Which span ends a run over OTLP: the run's outermost agent-like span, under no parent or only
 * under its process's outermost spans (an HTTP server span, a remote parent), never a sub-agent
 * under another agent span. Real traces rarely have a parentless agent span: an instrumented web
 * server, a propagated traceparent, a multi-agent workflow or LangChain put one above it.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const J = JSON.stringify;
const { SPAN_KIND_SERVER, SPAN_KIND_CONSUMER } = otlp.Span_SpanKind;
/** OTLP span flags: the exporter says whether the parent is remote (0x100), and that it is (0x200). */
const PARENT_LOCAL = 0x100;
const PARENT_REMOTE = 0x300;

type Spec = Omit<SpanSpec, 'trace'>;
const span = (s: Spec): otlp.Span => otlpSpan({ trace: TRACE, ...s });
const request = (spans: otlp.Span[]): otlp.ExportTraceServiceRequest => exportOf(spans, 'web-svc');

function kinds(items: StreamItem[]): string[] {
  return items.map((i) => (i.kind === 'span' ? `span ${i.span.name}` : i.kind));
}

// The audit's t6 trace: a support agent whose refund tool failed, answering "Refunded!".
const HTTP = '1111111111111111';
const AGENT = '2222222222222222';
const TOOL = '3333333333333333';
const WORKFLOW = '4444444444444444';
const INNER = '5555555555555555';
const REMOTE = 'aaaaaaaaaaaaaaaa';

function agent(parent: string | undefined, more: Partial<Spec> = {}): otlp.Span {
  return span({
    id: AGENT,
    parent,
    name: 'invoke_agent support-agent',
    start: 0,
    end: 3,
    attrs: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'support-agent',
      'gen_ai.input.messages': J([{ role: 'user', parts: [{ type: 'text', content: 'Refund order 7' }] }]),
      'gen_ai.output.messages': J([{ role: 'assistant', parts: [{ type: 'text', content: 'Refunded!' }] }]),
    },
    ...more,
  });
}

function failedTool(parent: string): otlp.Span {
  return span({
    id: TOOL,
    parent,
    name: 'execute_tool refund',
    start: 1,
    end: 2,
    attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'refund', 'gen_ai.tool.call.arguments': J({ id: 7 }) },
    failed: 'gateway down',
  });
}

function httpServer(parent?: string): otlp.Span {
  return span({ id: HTTP, parent, name: 'POST /chat', kind: SPAN_KIND_SERVER, start: 0, end: 4, attrs: { 'http.request.method': 'POST', 'http.route': '/chat' } });
}

describe('mapOtlpExport: the span that ends a run', () => {
  it('ends the run from an invoke_agent span under an HTTP server span, after the run\'s last span', () => {
    const items = mapOtlpExport(request([failedTool(AGENT), agent(HTTP), httpServer()])).items;
    expect(kinds(items)).toEqual(['run_start', 'span execute_tool refund', 'span invoke_agent support-agent', 'span POST /chat', 'run_end']);
    expect(runEnds(items)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Refunded!', ts_ms: 1700000003000 }]);
    expect(runStarts(items)).toEqual([
      { event: 'run_start', run_id: TRACE, workflow: 'support-agent', user_message: 'Refund order 7', ts_ms: 1700000000000 },
    ]);
    // The HTTP span is the run's too, with the run's workflow.
    expect(spansOf(items).map((s) => [s.name, s.type, s.workflow])).toEqual([
      ['execute_tool refund', 'tool', 'support-agent'],
      ['invoke_agent support-agent', 'agent', 'support-agent'],
      ['POST /chat', 'other', 'support-agent'],
    ]);
  });

  it('ends it under an HTTP server span whose parent is the caller\'s (a propagated traceparent), and under a queue consumer span', () => {
    const served = mapOtlpExport(request([failedTool(AGENT), agent(HTTP), httpServer(REMOTE)])).items;
    expect(runEnds(served)).toMatchObject([{ status: 'ok', final_output: 'Refunded!' }]);
    const consumer = span({ id: HTTP, parent: REMOTE, name: 'process jobs', kind: SPAN_KIND_CONSUMER, start: 0, end: 4 });
    expect(runEnds(mapOtlpExport(request([agent(HTTP), consumer])).items)).toMatchObject([{ final_output: 'Refunded!' }]);
  });

  it('ends it from an agent span whose parent the exporter marks remote, not from one whose parent it marks local or does not say', () => {
    const remote = mapOtlpExport(request([failedTool(AGENT), agent(REMOTE, { flags: PARENT_REMOTE })])).items;
    expect(runEnds(remote)).toMatchObject([{ status: 'ok', final_output: 'Refunded!' }]);
    // Local: its parent is in the same process and comes in a later export (it may be an agent span).
    expect(runEnds(mapOtlpExport(request([failedTool(AGENT), agent(HTTP, { flags: PARENT_LOCAL })])).items)).toEqual([]);
    // Not said (older exporters): a sub-agent exported before its outer agent looks the same.
    expect(runEnds(mapOtlpExport(request([failedTool(AGENT), agent(HTTP)])).items)).toEqual([]);
  });

  it('ends it from an invoke_workflow span, not from the agents it runs', () => {
    const workflow = span({
      id: WORKFLOW,
      name: 'invoke_workflow support-pipeline',
      start: 0,
      end: 5,
      attrs: {
        'gen_ai.operation.name': 'invoke_workflow',
        'gen_ai.input.messages': J([{ role: 'user', content: 'Refund order 7' }]),
        'gen_ai.output.messages': J([{ role: 'assistant', content: 'Your refund is on its way.' }]),
      },
    });
    const items = mapOtlpExport(request([failedTool(AGENT), agent(WORKFLOW), workflow])).items;
    expect(kinds(items)).toEqual([
      'run_start',
      'span execute_tool refund',
      'span invoke_agent support-agent',
      'span invoke_workflow support-pipeline',
      'run_end',
    ]);
    expect(runEnds(items)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Your refund is on its way.', ts_ms: 1700000005000 }]);
    expect(spansOf(items).find((s) => s.span_id === WORKFLOW)?.type).toBe('agent');
    // Under an HTTP server span too.
    const served = mapOtlpExport(request([agent(WORKFLOW), span({ id: WORKFLOW, parent: HTTP, end: 5, attrs: { 'gen_ai.operation.name': 'invoke_workflow' } }), httpServer()])).items;
    expect(runEnds(served)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Refunded!', ts_ms: 1700000005000 }]);
  });

  it("answers for an invoke_workflow span that recorded no output with its last agent's answer, and asks its first agent's question", () => {
    const workflow = span({ id: WORKFLOW, name: 'invoke_workflow support-pipeline', start: 0, end: 5, attrs: { 'gen_ai.operation.name': 'invoke_workflow', 'gen_ai.workflow.name': 'support-pipeline' } });
    const triage = span({
      id: INNER,
      parent: WORKFLOW,
      name: 'invoke_agent triage',
      start: 0,
      end: 1,
      attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.input.messages': J([{ role: 'user', content: 'I want my money back for order 7' }]), 'gen_ai.output.messages': J([{ role: 'assistant', content: 'to refunds' }]) },
    });
    const items = mapOtlpExport(request([triage, failedTool(AGENT), agent(WORKFLOW, { start: 1 }), workflow])).items;
    expect(runEnds(items)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Refunded!', ts_ms: 1700000005000 }]);
    expect(runStarts(items)).toEqual([
      { event: 'run_start', run_id: TRACE, workflow: 'support-pipeline', user_message: 'I want my money back for order 7', ts_ms: 1700000000000 },
    ]);
    // Its last agent answered nothing: no_output; the workflow failed: error.
    const silent = span({ id: AGENT, parent: WORKFLOW, end: 3, attrs: { 'gen_ai.operation.name': 'invoke_agent', 'output.value': '' } });
    expect(runEnds(mapOtlpExport(request([silent, workflow])).items)).toMatchObject([{ status: 'no_output', final_output: '' }]);
    const failed = span({ id: WORKFLOW, end: 5, attrs: { 'gen_ai.operation.name': 'invoke_workflow' }, failed: 'crashed' });
    expect(runEnds(mapOtlpExport(request([agent(WORKFLOW), failed])).items)).toMatchObject([{ status: 'error', final_output: 'Refunded!' }]);
  });

  it('never ends a run from a sub-agent under another agent span', () => {
    const inner = span({
      id: INNER,
      parent: TOOL,
      name: 'invoke_agent refund-agent',
      start: 1,
      end: 2,
      attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'refund-agent', 'gen_ai.output.messages': J([{ role: 'assistant', content: 'refund failed' }]) },
      failed: 'refund-agent gave up',
    });
    const asTool = span({ id: TOOL, parent: AGENT, name: 'execute_tool refund-agent', start: 1, end: 2, attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'refund-agent' } });
    // In one export: the outer agent's end only (the inner failed, the outer answered).
    const items = mapOtlpExport(request([inner, asTool, agent(undefined)])).items;
    expect(runEnds(items)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Refunded!', ts_ms: 1700000003000 }]);
    expect(kinds(items).at(-1)).toBe('run_end');
    // Directly under the outer agent span, and under it behind an HTTP server span.
    const direct = span({ id: INNER, parent: AGENT, end: 2, attrs: { 'gen_ai.operation.name': 'invoke_agent' }, failed: 'gave up' });
    expect(runEnds(mapOtlpExport(request([direct, agent(HTTP), httpServer()])).items)).toMatchObject([{ status: 'ok', final_output: 'Refunded!' }]);
    // Exported before its outer agent (a later export), its parent marked local: no end from it.
    expect(runEnds(mapOtlpExport(request([span({ id: INNER, parent: TOOL, flags: PARENT_LOCAL, attrs: { 'gen_ai.operation.name': 'invoke_agent' } })])).items)).toEqual([]);
    // The outer agent, exported later, ends it.
    expect(runEnds(mapOtlpExport(request([asTool, agent(undefined)])).items)).toMatchObject([{ final_output: 'Refunded!' }]);
  });

  it('ends it from the agent that ends last when one request runs two agents one after the other', () => {
    const triage = span({ id: INNER, parent: HTTP, name: 'invoke_agent triage', start: 0, end: 1, attrs: { 'gen_ai.operation.name': 'invoke_agent', 'output.value': 'to refunds' } });
    const items = mapOtlpExport(request([triage, agent(HTTP), httpServer()])).items;
    expect(runEnds(items)).toMatchObject([{ final_output: 'Refunded!', ts_ms: 1700000003000 }]);
  });

  it('ends it from an OpenInference CHAIN with no parent (LangChain, LangGraph), not from the AGENT or chains under it', () => {
    const chain = span({
      id: WORKFLOW,
      name: 'LangGraph',
      start: 0,
      end: 5,
      attrs: { 'openinference.span.kind': 'CHAIN', 'input.value': 'Refund order 7 please', 'input.mime_type': 'text/plain', 'output.value': 'Your refund of $50 is done.', 'output.mime_type': 'text/plain' },
    });
    const node = span({ id: HTTP, parent: WORKFLOW, name: 'agent', start: 0, end: 4, attrs: { 'openinference.span.kind': 'AGENT', 'output.value': 'partial', 'output.mime_type': 'text/plain' } });
    const tool = span({ id: TOOL, parent: HTTP, name: 'refund', start: 1, end: 2, attrs: { 'openinference.span.kind': 'TOOL', 'tool.name': 'refund' }, failed: 'Payment gateway timed out' });
    const items = mapOtlpExport(request([tool, node, chain])).items;
    expect(kinds(items)).toEqual(['run_start', 'span refund', 'span agent', 'span LangGraph', 'run_end']);
    expect(runStarts(items)).toMatchObject([{ user_message: 'Refund order 7 please' }]);
    expect(runEnds(items)).toEqual([{ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'Your refund of $50 is done.', ts_ms: 1700000005000 }]);
    // The chain keeps its type; only its run's events come from it.
    expect(spansOf(items).find((s) => s.name === 'LangGraph')?.type).toBe('other');
    // A chain under an HTTP server span in the same export is the outermost chain too.
    const served = span({ id: WORKFLOW, parent: AGENT, end: 5, attrs: { 'openinference.span.kind': 'CHAIN', 'output.value': 'done', 'output.mime_type': 'text/plain' } });
    const server = span({ id: AGENT, name: 'POST /chat', kind: SPAN_KIND_SERVER, end: 6 });
    expect(runEnds(mapOtlpExport(request([served, server])).items)).toMatchObject([{ final_output: 'done' }]);
    // A chain whose parent is not in the export (another chain, exported later) ends nothing.
    const nested = span({ id: TOOL, parent: WORKFLOW, attrs: { 'openinference.span.kind': 'CHAIN', 'output.value': 'step' } });
    expect(runEnds(mapOtlpExport(request([nested])).items)).toEqual([]);
    // A chain under an OpenInference AGENT is no run's.
    const underAgent = span({ id: TOOL, parent: HTTP, attrs: { 'openinference.span.kind': 'CHAIN' } });
    expect(runEnds(mapOtlpExport(request([underAgent, node, chain])).items)).toHaveLength(1);
  });

  it('makes no run end for a trace without an agent span (model calls alone)', () => {
    const chat = span({ id: AGENT, name: 'ChatCompletion', attrs: { 'openinference.span.kind': 'LLM', 'output.value': 'Done' } });
    const genai = span({ id: TOOL, parent: HTTP, name: 'chat gpt-4o', attrs: { 'gen_ai.operation.name': 'chat' } });
    expect(runEnds(mapOtlpExport(request([chat])).items)).toEqual([]);
    expect(runEnds(mapOtlpExport(request([genai, httpServer()])).items)).toEqual([]);
  });

  it('makes one run end for each run of the export, its events in its own run', () => {
    const other = 'ffffffffffffffffffffffffffffffff';
    const otherAgent = otlp.Span.fromPartial({ ...agent(undefined), trace_id: Buffer.from(other, 'hex') });
    const items = mapOtlpExport(request([failedTool(AGENT), agent(HTTP), otherAgent, httpServer()])).items;
    expect(runEnds(items).map((e) => e.run_id).sort()).toEqual([TRACE, other].sort());
    // Each run_end after its run's last span.
    expect(kinds(items)).toEqual([
      'run_start',
      'span execute_tool refund',
      'span invoke_agent support-agent',
      'run_start',
      'span invoke_agent support-agent',
      'run_end',
      'span POST /chat',
      'run_end',
    ]);
  });
});
