export {
  NeatrootsClient,
  Run,
  RunHaltedError,
  ExportRejectedError,
  PrecheckUnansweredError,
} from './client';
export type {
  NeatrootsClientOptions,
  ClientStats,
  StartRunOptions,
  EndRunOptions,
  RetryOptions,
  SpanInit,
  SpanType,
  RunEndStatus,
  Usage,
  Note,
  PrecheckMode,
} from './client';
