import { otlp } from '@neatroots/proto';
import { anyValueToJson, mapOtlpExport, nanosToMs } from './otlp';
import { DEFAULT_SPAN_LIMITS } from './limits';
import type { RunEnd, RunStart, Span, StreamItem } from './types';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const ROOT = 'b7ad6b7169203331';

function av(v: unknown): otlp.AnyValue {
  if (typeof v === 'string') return { value: { $case: 'string_value', value: v } };
  if (typeof v === 'boolean') return { value: { $case: 'bool_value', value: v } };
  if (typeof v === 'bigint') return { value: { $case: 'int_value', value: v.toString() } };
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { value: { $case: 'int_value', value: String(v) } } : { value: { $case: 'double_value', value: v } };
  }
  if (Array.isArray(v)) return { value: { $case: 'array_value', value: { values: v.map(av) } } };
  if (v && typeof v === 'object') return { value: { $case: 'kvlist_value', value: { values: kvs(v as Record<string, unknown>) } } };
  return {};
}

function kvs(attrs: Record<string, unknown>): otlp.KeyValue[] {
  return Object.entries(attrs).map(([key, v]) => ({ key, value: av(v) }));
}

interface SpanSpec {
  trace?: string;
  id: string;
  parent?: string;
  name?: string;
  start?: string;
  end?: string;
  attrs?: Record<string, unknown>;
  status?: { code: otlp.Status_StatusCode; message?: string };
  events?: { name: string; attrs: Record<string, unknown> }[];
}

function span(s: SpanSpec): otlp.Span {
  return otlp.Span.fromPartial({
    trace_id: Buffer.from(s.trace ?? TRACE, 'hex'),
    span_id: Buffer.from(s.id, 'hex'),
    parent_span_id: Buffer.from(s.parent ?? '', 'hex'),
    name: s.name ?? 'span',
    start_time_unix_nano: s.start ?? '1700000000000000000',
    end_time_unix_nano: s.end ?? '1700000001000000000',
    attributes: kvs(s.attrs ?? {}),
    status: s.status ? { code: s.status.code, message: s.status.message ?? '' } : undefined,
    events: (s.events ?? []).map((e) => ({ name: e.name, time_unix_nano: '0', attributes: kvs(e.attrs) })),
  });
}

function request(spans: otlp.Span[], resource: Record<string, unknown> = { 'service.name': 'support-bot' }): otlp.ExportTraceServiceRequest {
  return { resource_spans: [{ resource: { attributes: kvs(resource), dropped_attributes_count: 0 }, scope_spans: [{ spans, schema_url: '' }], schema_url: '' }] };
}

function spansOf(items: StreamItem[]): Span[] {
  return items.flatMap((i) => (i.kind === 'span' ? [i.span] : []));
}

describe('nanosToMs', () => {
  it('keeps microsecond precision on epoch nanoseconds beyond 2^53', () => {
    expect(nanosToMs('1700000000123456789')).toBe(1700000000123.456);
    // Number('1700000000123999999') rounds up to ...124000000: the BigInt path does not.
    expect(nanosToMs('1700000000123999999')).toBe(1700000000123.999);
    expect(Math.floor(nanosToMs('1700000000123999999') as number)).toBe(1700000000123);
    expect(nanosToMs('1700000000000000000')).toBe(1700000000000);
    expect(nanosToMs('0')).toBeUndefined();
  });

  it('orders two calls made within the same millisecond', () => {
    const a = nanosToMs('1700000000123000100') as number;
    const b = nanosToMs('1700000000123000900') as number;
    expect(a).toBe(b); // below a microsecond: equal
    const c = nanosToMs('1700000000123400000') as number;
    expect(c).toBeGreaterThan(a);
  });

  it('refuses non-decimal input', () => {
    expect(() => nanosToMs('-1')).toThrow();
    expect(() => nanosToMs('1e18')).toThrow();
  });
});

describe('anyValueToJson', () => {
  it('converts every AnyValue kind', () => {
    expect(anyValueToJson(av({ a: [1, 'x', true, 1.5], b: { c: null } }))).toEqual({ a: [1, 'x', true, 1.5], b: { c: null } });
    expect(anyValueToJson(av(9007199254740993n))).toBe('9007199254740993');
    expect(anyValueToJson({ value: { $case: 'bytes_value', value: Buffer.from('hi') } })).toBe('aGk=');
    expect(anyValueToJson(undefined)).toBeNull();
  });
});

describe('mapOtlpExport: OpenTelemetry GenAI conventions', () => {
  const tool = span({
    id: '00f067aa0ba902b7',
    parent: ROOT,
    name: 'execute_tool get_weather',
    start: '1700000000100000000',
    end: '1700000000350500000',
    attrs: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'get_weather',
      'gen_ai.tool.call.id': 'call_1',
      'gen_ai.tool.call.arguments': '{"city":"Paris"}',
      'gen_ai.tool.call.result': '{"temp":21}',
      'gen_ai.conversation.id': 'conv-1',
    },
  });
  const llm = span({
    id: '1111111111111111',
    parent: ROOT,
    name: 'chat gpt-4o',
    attrs: {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 30,
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] }]),
    },
  });
  const root = span({
    id: ROOT,
    name: 'invoke_agent weather-agent',
    attrs: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'weather-agent',
      'gen_ai.conversation.id': 'conv-1',
      'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: 'You are a weather assistant.' }]),
      'gen_ai.input.messages': JSON.stringify([
        { role: 'system', parts: [{ type: 'text', content: 'ignored' }] },
        { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
      ]),
      'gen_ai.output.messages': JSON.stringify([
        { role: 'assistant', parts: [{ type: 'text', content: 'It is 21°C in Paris.' }], finish_reason: 'stop' },
      ]),
      'gen_ai.tool.definitions': JSON.stringify([{ type: 'function', name: 'get_weather', description: 'Current weather' }]),
    },
  });

  it('maps a tool call', () => {
    const res = mapOtlpExport(request([tool]));
    expect(res).toMatchObject({ spans: 1, accepted: 1, rejected: [] });
    expect(res.items).toEqual([
      {
        kind: 'span',
        span: {
          run_id: TRACE,
          span_id: '00f067aa0ba902b7',
          parent_id: ROOT,
          type: 'tool',
          name: 'execute_tool get_weather',
          tool: 'get_weather',
          input: { city: 'Paris' },
          output: { temp: 21 },
          status: 'ok',
          start_ms: 1700000000100,
          end_ms: 1700000000350.5,
          session_id: 'conv-1',
          workflow: 'support-bot',
          attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.call.id': 'call_1' },
        },
      },
    ]);
  });

  it('maps an llm call with usage and the response model', () => {
    const [s] = spansOf(mapOtlpExport(request([llm])).items);
    expect(s).toMatchObject({
      type: 'llm',
      model: 'gpt-4o-2024-08-06',
      usage: { input_tokens: 120, output_tokens: 30, total_tokens: 150 },
      input: [{ role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] }],
    });
    // The request model did not move into a field, so it stays an attribute.
    expect(s.attributes).toEqual({
      'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o',
    });
  });

  it('maps the operation names to span types', () => {
    const ops: [string, string][] = [
      ['chat', 'llm'], ['text_completion', 'llm'], ['generate_content', 'llm'], ['invoke_agent', 'agent'],
      ['create_agent', 'agent'], ['embeddings', 'other'], ['execute_tool', 'tool'],
    ];
    const spans = ops.map(([op], i) => span({ id: `aaaaaaaaaaaaaa${String(i).padStart(2, '0')}`, parent: ROOT, attrs: { 'gen_ai.operation.name': op } }));
    const types = spansOf(mapOtlpExport(request(spans)).items).map((s) => s.type);
    expect(types).toEqual(ops.map(([, t]) => t));
  });

  it('maps an MCP tools/call as mcp_tool, with or without the GenAI operation', () => {
    const withOp = span({
      id: '2222222222222222',
      parent: ROOT,
      name: 'tools/call search_docs',
      attrs: {
        'gen_ai.operation.name': 'execute_tool',
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': 'search_docs',
        'gen_ai.tool.call.arguments': '{"query":"refunds"}',
        'gen_ai.tool.call.result': '{"content":[{"type":"text","text":"Refunds within 30 days"}]}',
        'mcp.session.id': 'mcp-s1',
      },
    });
    const bare = span({ id: '3333333333333333', parent: ROOT, name: 'tools/call', attrs: { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'x' } });
    const list = span({ id: '4444444444444444', parent: ROOT, name: 'tools/list', attrs: { 'mcp.method.name': 'tools/list' } });
    const [a, b, c] = spansOf(mapOtlpExport(request([withOp, bare, list])).items);
    expect(a).toMatchObject({
      type: 'mcp_tool', tool: 'search_docs', input: { query: 'refunds' },
      output: { content: [{ type: 'text', text: 'Refunds within 30 days' }] },
      attributes: { 'mcp.method.name': 'tools/call', 'mcp.session.id': 'mcp-s1', 'gen_ai.operation.name': 'execute_tool' },
    });
    expect(b).toMatchObject({ type: 'mcp_tool', tool: 'x' });
    expect(c.type).toBe('other');
  });

  it('keeps a tool result that is not JSON as text', () => {
    const s = span({ id: '5555555555555555', parent: ROOT, attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 't', 'gen_ai.tool.call.result': '{not json' } });
    expect(spansOf(mapOtlpExport(request([s])).items)[0].output).toBe('{not json');
  });

  it('maps span status and error.type to an error', () => {
    const failed = span({
      id: '6666666666666666', parent: ROOT,
      attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'pay', 'error.type': 'TimeoutError' },
      status: { code: otlp.Status_StatusCode.STATUS_CODE_ERROR, message: 'payment gateway timed out' },
    });
    const typeOnly = span({
      id: '7777777777777777', parent: ROOT,
      attrs: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'pay', 'error.type': 'TimeoutError' },
      status: { code: otlp.Status_StatusCode.STATUS_CODE_ERROR },
    });
    const unsetWithType = span({ id: '8888888888888888', parent: ROOT, attrs: { 'gen_ai.operation.name': 'chat', 'error.type': '429' } });
    const fromException = span({
      id: '9999999999999999', parent: ROOT, attrs: { 'gen_ai.operation.name': 'chat' },
      status: { code: otlp.Status_StatusCode.STATUS_CODE_ERROR },
      events: [{ name: 'exception', attrs: { 'exception.type': 'ValueError', 'exception.message': 'bad input' } }],
    });
    const [a, b, c, d] = spansOf(mapOtlpExport(request([failed, typeOnly, unsetWithType, fromException])).items);
    expect(a).toMatchObject({ status: 'error', error: 'payment gateway timed out', attributes: { 'error.type': 'TimeoutError' } });
    expect(b).toMatchObject({ status: 'error', error: 'TimeoutError' });
    expect(b.attributes?.['error.type']).toBeUndefined();
    expect(c).toMatchObject({ status: 'error', error: '429' });
    expect(d).toMatchObject({ status: 'error', error: 'bad input' });
  });

  it('derives run_start before the run and run_end after the root agent span', () => {
    const res = mapOtlpExport(request([tool, llm, root]));
    expect(res.accepted).toBe(3);
    expect(res.items.map((i) => i.kind)).toEqual(['run_start', 'span', 'span', 'span', 'run_end']);
    const start = (res.items[0] as { run: RunStart }).run;
    expect(start).toEqual({
      event: 'run_start',
      run_id: TRACE,
      workflow: 'weather-agent',
      session_id: 'conv-1',
      system_prompt: 'You are a weather assistant.',
      user_message: 'Weather in Paris?',
      tools: [{ name: 'get_weather', description: 'Current weather' }],
      ts_ms: 1700000000000,
    });
    const end = (res.items[4] as { run: RunEnd }).run;
    expect(end).toEqual({ event: 'run_end', run_id: TRACE, status: 'ok', final_output: 'It is 21°C in Paris.', ts_ms: 1700000001000 });
    // Child spans take their run's agent name as workflow rather than the service.name fallback.
    expect(spansOf(res.items).map((s) => s.workflow)).toEqual(['weather-agent', 'weather-agent', 'weather-agent']);
    const rootSpan = spansOf(res.items)[2];
    expect(rootSpan).toMatchObject({ type: 'agent', workflow: 'weather-agent' });
    expect(rootSpan.parent_id).toBeUndefined();
    expect(rootSpan.attributes?.['gen_ai.system_instructions']).toBeUndefined();
  });

  it('keeps system instructions and tool definitions in attributes except on the root agent span that makes the run_start', () => {
    // GenAI instrumentations put the system prompt and the tool definitions on inference spans.
    const system = JSON.stringify([{ type: 'text', content: 'You are a weather assistant.' }]);
    const defs = JSON.stringify([{ type: 'function', name: 'get_weather', description: 'Current weather' }]);
    const chat = span({
      id: '1313131313131313',
      parent: ROOT,
      name: 'chat gpt-4o',
      attrs: { 'gen_ai.operation.name': 'chat', 'gen_ai.system_instructions': system, 'gen_ai.tool.definitions': defs },
    });
    // A root agent span without instructions or input makes no run_start: nothing uses them.
    const bareRoot = span({
      trace: 'dddddddddddddddddddddddddddddddd',
      id: ROOT,
      attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.tool.definitions': defs },
    });
    const res = mapOtlpExport(request([chat, root, bareRoot]));
    expect(res.items.map((i) => i.kind)).toEqual(['run_start', 'span', 'span', 'run_end', 'span', 'run_end']);
    const [chatSpan, rootSpan, bareSpan] = spansOf(res.items);
    expect(chatSpan.attributes).toEqual({
      'gen_ai.operation.name': 'chat', 'gen_ai.system_instructions': system, 'gen_ai.tool.definitions': defs,
    });
    expect(bareSpan.attributes).toEqual({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.tool.definitions': defs });
    // The root agent span still fills the run_start, and does not keep them in attributes too.
    expect((res.items[0] as { run: RunStart }).run).toMatchObject({
      system_prompt: 'You are a weather assistant.',
      tools: [{ name: 'get_weather', description: 'Current weather' }],
    });
    expect(rootSpan.attributes).toEqual({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather-agent' });
  });

  it('ends a run with error, no_output (an empty output) or ok (no output recorded) from the root span', () => {
    const failedRoot = span({ id: ROOT, attrs: { 'gen_ai.operation.name': 'invoke_agent' }, status: { code: otlp.Status_StatusCode.STATUS_CODE_ERROR, message: 'crashed' } });
    const emptyRoot = span({ trace: 'ffffffffffffffffffffffffffffffff', id: ROOT, attrs: { 'gen_ai.operation.name': 'invoke_agent', 'output.value': '' } });
    // Without content capture no output is recorded at all: that says nothing about the answer.
    const uncapturedRoot = span({ trace: 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', id: ROOT, attrs: { 'gen_ai.operation.name': 'invoke_agent' } });
    const items = mapOtlpExport(request([failedRoot, emptyRoot, uncapturedRoot])).items;
    expect(items.map((i) => i.kind)).toEqual(['span', 'run_end', 'span', 'run_end', 'span', 'run_end']);
    expect((items[1] as { run: RunEnd }).run.status).toBe('error');
    expect((items[3] as { run: RunEnd }).run.status).toBe('no_output');
    expect((items[5] as { run: RunEnd }).run.status).toBe('ok');
  });

  it('takes project and workflow from the resource and neatroots attributes', () => {
    const s = span({ id: '1212121212121212', parent: ROOT, attrs: { 'gen_ai.operation.name': 'chat', 'neatroots.run_id': 'run-42' } });
    const [a] = spansOf(mapOtlpExport(request([s], { 'service.name': 'svc', 'neatroots.project': 'shop', 'neatroots.workflow': 'refunds' })).items);
    expect(a).toMatchObject({ run_id: 'run-42', project: 'shop', workflow: 'refunds' });
    const [b] = spansOf(mapOtlpExport(request([s], { 'service.name': 'unknown_service:node' })).items);
    expect(b.workflow).toBeUndefined();
  });
});

describe('mapOtlpExport: OpenInference conventions', () => {
  it('maps LLM, TOOL, AGENT, RETRIEVER, CHAIN and EMBEDDING spans', () => {
    const llm = span({
      id: 'a1a1a1a1a1a1a1a1', parent: ROOT, name: 'ChatOpenAI',
      attrs: {
        'openinference.span.kind': 'LLM', 'llm.model_name': 'gpt-4o-mini', 'llm.token_count.prompt': 50,
        'llm.token_count.completion': 7, 'llm.token_count.total': 57, 'input.value': '{"messages":[{"role":"user","content":"hi"}]}',
        'input.mime_type': 'application/json', 'output.value': 'hello!', 'output.mime_type': 'text/plain', 'session.id': 'chat-9',
      },
    });
    const tool = span({
      id: 'a2a2a2a2a2a2a2a2', parent: ROOT, name: 'lookup_order',
      attrs: { 'openinference.span.kind': 'TOOL', 'tool.name': 'lookup_order', 'input.value': '{"order_id":"A1"}', 'output.value': '{"owner":"bob"}' },
    });
    const plainJsonLooking = span({
      id: 'a3a3a3a3a3a3a3a3', parent: ROOT,
      attrs: { 'openinference.span.kind': 'TOOL', 'tool.name': 't', 'input.value': '[draft]', 'input.mime_type': 'text/plain' },
    });
    const kinds = ['AGENT', 'RETRIEVER', 'CHAIN', 'EMBEDDING'].map((k, i) =>
      span({ id: `b${i}b${i}b${i}b${i}b${i}b${i}b${i}b${i}`, parent: ROOT, attrs: { 'openinference.span.kind': k } }),
    );
    const [l, t, p, ...rest] = spansOf(mapOtlpExport(request([llm, tool, plainJsonLooking, ...kinds])).items);
    expect(l).toMatchObject({
      type: 'llm', model: 'gpt-4o-mini', usage: { input_tokens: 50, output_tokens: 7, total_tokens: 57 },
      input: { messages: [{ role: 'user', content: 'hi' }] }, output: 'hello!', session_id: 'chat-9',
    });
    expect(t).toMatchObject({ type: 'tool', tool: 'lookup_order', input: { order_id: 'A1' }, output: { owner: 'bob' } });
    expect(p.input).toBe('[draft]');
    expect(rest.map((s) => s.type)).toEqual(['agent', 'retrieval', 'other', 'other']);
  });
});

describe('mapOtlpExport: rejections', () => {
  it('rejects malformed spans one by one and keeps the rest', () => {
    const good = span({ id: '0101010101010101', parent: ROOT, attrs: { 'gen_ai.operation.name': 'chat' } });
    const shortTrace = span({ trace: 'abcd', id: '0202020202020202' });
    const zeroTrace = span({ trace: '00000000000000000000000000000000', id: '0303030303030303' });
    const noSpanId = span({ id: '' });
    const backwards = span({ id: '0404040404040404', start: '1700000000000000002', end: '1700000000000000001' });
    const badParent = span({ id: '0505050505050505', parent: 'abcd' });
    const res = mapOtlpExport(request([good, shortTrace, zeroTrace, noSpanId, backwards, badParent]));
    expect(res.spans).toBe(6);
    expect(res.accepted).toBe(1);
    expect(spansOf(res.items).map((s) => s.span_id)).toEqual(['0101010101010101']);
    expect(res.rejected).toEqual([
      { index: 1, run_id: 'abcd', span_id: '0202020202020202', field: 'trace_id', reason: 'must be 16 bytes, got 2' },
      { index: 2, run_id: '00000000000000000000000000000000', span_id: '0303030303030303', field: 'trace_id', reason: 'is all zeros' },
      { index: 3, run_id: TRACE, field: 'span_id', reason: 'is required' },
      {
        index: 4, run_id: TRACE, span_id: '0404040404040404', field: 'end_time_unix_nano',
        reason: 'is before start_time_unix_nano (1700000000000000001 < 1700000000000000002)',
      },
      { index: 5, run_id: TRACE, span_id: '0505050505050505', field: 'parent_span_id', reason: 'must be 8 bytes or empty, got 2' },
    ]);
  });

  it('counts span indexes across resources and scopes', () => {
    const req: otlp.ExportTraceServiceRequest = {
      resource_spans: [
        { resource: undefined, schema_url: '', scope_spans: [{ spans: [span({ id: '0101010101010101' })], schema_url: '' }, { spans: [span({ id: '0202020202020202' })], schema_url: '' }] },
        { resource: undefined, schema_url: '', scope_spans: [{ spans: [span({ id: '' })], schema_url: '' }] },
      ],
    };
    expect(mapOtlpExport(req).rejected.map((r) => r.index)).toEqual([2]);
  });

  it("stamps the key's project and rejects a span naming another", () => {
    const mine = span({ id: '0101010101010101', attrs: { 'neatroots.project': 'shop' } });
    const unnamed = span({ id: '0202020202020202' });
    const theirs = span({ id: '0303030303030303', attrs: { 'neatroots.project': 'bank' } });
    const res = mapOtlpExport(request([mine, unnamed, theirs]), { project: 'shop' });
    expect(spansOf(res.items).map((s) => s.project)).toEqual(['shop', 'shop']);
    expect(res.rejected).toEqual([
      { index: 2, run_id: TRACE, span_id: '0303030303030303', field: 'project', reason: 'names project "bank", but the API key is for "shop"' },
    ]);
  });

  it('rejects a run, span or session id of "." or "..", naming the attribute sent: no link or API path could name it', () => {
    const ok = span({ id: '0101010101010101', attrs: { 'neatroots.run_id': '...', 'gen_ai.conversation.id': '.x' } });
    const up = span({ id: '0202020202020202', attrs: { 'neatroots.run_id': '..' } });
    const here = span({ id: '0303030303030303', attrs: { 'neatroots.run_id': '.' } });
    const session = span({ id: '0404040404040404', attrs: { 'gen_ai.conversation.id': '..' } });
    const openInference = span({ id: '0505050505050505', attrs: { 'session.id': '.' } });
    const res = mapOtlpExport(request([ok, up, here, session, openInference]));
    expect(spansOf(res.items).map((s) => [s.run_id, s.session_id])).toEqual([['...', '.x']]);
    expect(res.rejected).toEqual([
      { index: 1, field: 'neatroots.run_id', reason: 'must not be "..": in a link or an API path it is a step up, not a name' },
      { index: 2, field: 'neatroots.run_id', reason: 'must not be ".": in a link or an API path it is a step up, not a name' },
      { index: 3, run_id: TRACE, span_id: '0404040404040404', field: 'gen_ai.conversation.id', reason: 'must not be "..": in a link or an API path it is a step up, not a name' },
      { index: 4, run_id: TRACE, span_id: '0505050505050505', field: 'session.id', reason: 'must not be ".": in a link or an API path it is a step up, not a name' },
    ]);
  });

  it('drops the run events of a rejected root', () => {
    const root = span({ id: ROOT, attrs: { 'gen_ai.operation.name': 'invoke_agent', 'neatroots.project': 'bank' } });
    expect(mapOtlpExport(request([root]), { project: 'shop' }).items).toEqual([]);
  });
});

describe('attributes named like Object.prototype\'s properties', () => {
  // As an exporter sends them: a list of keys and values, never an object literal.
  const proto: otlp.KeyValue = { key: '__proto__', value: av({ 'gen_ai.tool.name': 'delete_all', secret: 'kept' }) };
  const tool = (extra: otlp.KeyValue[]) =>
    otlp.Span.fromPartial({
      ...span({ id: '0101010101010101', attrs: { 'gen_ai.operation.name': 'execute_tool' } }),
      attributes: [...kvs({ 'gen_ai.operation.name': 'execute_tool' }), ...extra],
    });

  it('keeps an attribute named __proto__ under its name, and never reads the span\'s fields from inside it', () => {
    const res = mapOtlpExport(request([tool([proto, { key: 'constructor', value: av('c') }])]), { limits: { limits: DEFAULT_SPAN_LIMITS, now: Date.now() } });
    const [s] = spansOf(res.items);
    expect(res.rejected).toEqual([]);
    expect(s.tool).not.toBe('delete_all');
    expect(Object.getPrototypeOf(s.attributes)).toBe(Object.prototype);
    expect(Object.hasOwn(s.attributes!, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(s.attributes, '__proto__')?.value).toEqual({ 'gen_ai.tool.name': 'delete_all', secret: 'kept' });
    expect(s.attributes!.constructor).toBe('c');
    // and so it travels: JSON text, and back
    const back = JSON.parse(JSON.stringify(s)) as Span;
    expect(Object.getOwnPropertyDescriptor(back.attributes, '__proto__')?.value).toEqual({ 'gen_ai.tool.name': 'delete_all', secret: 'kept' });
    expect(back.tool).toBe(s.tool);
  });

  it('keeps a __proto__ key inside a kvlist value too', () => {
    const nested = mapOtlpExport(request([tool([{ key: 'kv', value: { value: { $case: 'kvlist_value', value: { values: [proto] } } } }])]));
    const [n] = spansOf(nested.items);
    expect(Object.getOwnPropertyDescriptor(n.attributes!.kv, '__proto__')?.value).toEqual({ 'gen_ai.tool.name': 'delete_all', secret: 'kept' });
  });
});
