/**
 * The OTLP trace subset (opentelemetry.proto.{collector.trace,trace,resource,common}.v1)
 * in one flat namespace; the message names do not collide across these files.
 */
export {
  ExportTraceServiceRequest,
  ExportTraceServiceResponse,
  ExportTracePartialSuccess,
  TraceServiceService,
  TraceServiceClient,
} from './gen/opentelemetry/proto/collector/trace/v1/trace_service';
export type { TraceServiceServer } from './gen/opentelemetry/proto/collector/trace/v1/trace_service';
export {
  ResourceSpans,
  ScopeSpans,
  Span,
  Span_SpanKind,
  Span_Event,
  Span_Link,
  Status,
  Status_StatusCode,
} from './gen/opentelemetry/proto/trace/v1/trace';
export { Resource } from './gen/opentelemetry/proto/resource/v1/resource';
export { AnyValue, ArrayValue, KeyValueList, KeyValue, InstrumentationScope } from './gen/opentelemetry/proto/common/v1/common';
