/**
 * Generated protobuf code (scripts/codegen.js, ts-proto from proto/), re-exported by package.
 *
 *   import { v1, otlp } from '@neatroots/proto';
 *   v1.Span.encode(...); otlp.ExportTraceServiceRequest.decode(...)
 *
 * `v1` is neatroots.v1 (spans, the Ingest and Question services, the bus messages); `otlp` is the OTLP
 * trace subset. The per-file namespaces below are there for code that wants one proto file's
 * module exactly as generated.
 */
export * as v1 from './v1';
export * as otlp from './otlp';

export * as neatrootsSpans from './gen/neatroots/v1/spans';
export * as neatrootsIngest from './gen/neatroots/v1/ingest';
export * as neatrootsBus from './gen/neatroots/v1/bus';
export * as neatrootsQuestion from './gen/neatroots/v1/question';
export * as otlpTrace from './gen/opentelemetry/proto/collector/trace/v1/trace_service';
export * as otlpTraceData from './gen/opentelemetry/proto/trace/v1/trace';
export * as otlpResource from './gen/opentelemetry/proto/resource/v1/resource';
export * as otlpCommon from './gen/opentelemetry/proto/common/v1/common';

/** The encode/decode surface every generated message has (identical in each generated file). */
export type { MessageFns, DeepPartial } from './gen/neatroots/v1/spans';
export * as health from './gen/grpc/health/v1/health';
export { bindGrpc, closeGrpcServer } from './server';
export { encodeMessage, varintSize, writeVarint } from './encode';
