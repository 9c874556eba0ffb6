export {
  NeatrootsClient,
  Run,
  RunHaltedError,
  ExportRejectedError,
} from './client';
export type {
  NeatrootsClientOptions,
  StartRunOptions,
  EndRunOptions,
  RetryOptions,
  SpanInit,
  SpanType,
  RunEndStatus,
  Usage,
  Note,
} from './client';
