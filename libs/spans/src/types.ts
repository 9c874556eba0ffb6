/**
 * The one span shape (CONTRACTS.md section 1). Every source (the JSON Lines files of
 * `neatroots replay`, the neatroots.v1 gRPC API, OTLP) is normalised to these types
 * before anything else looks at it.
 */
export const SPAN_TYPES = ['llm', 'tool', 'mcp_tool', 'agent', 'retrieval', 'other'] as const;
export type SpanType = (typeof SPAN_TYPES)[number];

export const RUN_END_STATUSES = ['ok', 'error', 'no_output', 'interrupted'] as const;
export type RunEndStatus = (typeof RUN_END_STATUSES)[number];

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
  cost?: number;
}

export interface Span {
  run_id: string;
  span_id: string;
  parent_id?: string;
  type: SpanType;
  /** The span's name; for a tool call the tool's name when none was given. */
  name: string;
  tool?: string;
  input?: unknown;
  output?: unknown;
  error?: string | null;
  status: 'ok' | 'error';
  start_ms?: number;
  end_ms?: number;
  usage?: Usage;
  model?: string;
  project?: string;
  workflow?: string;
  session_id?: string;
  attributes?: Record<string, unknown>;
}

export interface ToolInfo {
  name: string;
  description?: string;
}

export interface RunStart {
  event: 'run_start';
  run_id: string;
  project?: string;
  workflow?: string;
  session_id?: string;
  system_prompt?: string;
  user_message?: string;
  tools?: ToolInfo[];
  ts_ms?: number;
}

export interface RunEnd {
  event: 'run_end';
  run_id: string;
  status: RunEndStatus;
  final_output?: unknown;
  ts_ms?: number;
}

/** One item of the span stream. */
export type StreamItem =
  | { kind: 'span'; span: Span }
  | { kind: 'run_start'; run: RunStart }
  | { kind: 'run_end'; run: RunEnd };

/** An accepted item as it travels on the bus: stamped with its project and receipt time. */
export interface Envelope {
  project: string;
  /** Wall-clock epoch ms when ingest accepted it (or the replay clock). */
  received_ms: number;
  item: StreamItem;
}

export function itemRunId(item: StreamItem): string {
  return item.kind === 'span' ? item.span.run_id : item.run.run_id;
}
