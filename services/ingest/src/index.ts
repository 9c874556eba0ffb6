export { startIngest, DEFAULT_GRPC_PORT, DEFAULT_MAX_RECEIVE_BYTES, DEFAULT_OTLP_PORT } from './ingest';
export type { IngestHandle, IngestOptions } from './ingest';
export { apiKeyFrom } from './auth';
export type { ResolveKey } from './auth';
export type { IngestMetrics } from './metrics';
export { NoteHub } from './notes';
export type { NoteHubOptions, NoteStream } from './notes';
export { Pressure, retryStatus } from './pressure';
export type { PressureOptions, PressureReason, Refusal } from './pressure';
