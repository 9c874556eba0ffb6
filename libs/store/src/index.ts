import * as path from 'node:path';

/** This package's migrations, from src (tests) and dist (build) alike. */
export const MIGRATIONS_DIR = path.resolve(__dirname, '..', 'migrations');

export * from './records';
export * from './life';
export { StoreInputError, DEFAULT_PAGE, MAX_PAGE, DEFAULT_SPAN_PAGE, MAX_SPAN_PAGE, SPAN_PAGE_BYTES, chunks, cursorJson } from './sql';
export { RunsRepo, envelopeStatements, type ExpireLimits } from './runs.repo';
export { FindingsRepo, type DeliveryInput } from './findings.repo';
export { ProjectsRepo, hashApiKey, type ApiKeyScope, type ApiKeyGrant, type ProjectRecord, type CreatedApiKey } from './projects.repo';
export { AgentChecksFullError, agentChecksFull, ChecksRepo, type DbCheckOrigin, type DbCheckRecord, type DbCheckInput, type ListDbChecksQuery } from './checks.repo';
export { QuietChecks, type QuietChecksOptions, type IsQuiet } from './quiet';
export { StoreWriter, StoreWriterClosedError, type StoreWriterOptions } from './writer';
export { DeadLettersRepo, DEAD_LETTER_PAYLOAD_CHARS, type DeadLetterRecord, type ListDeadLettersQuery } from './dead-letters.repo';
export { STORE_MAX_JSON_DEPTH } from './storable';
export { QuestionsRepo, type QuestionResultRecord } from './questions.repo';
export * from './sop';
export * from './review';
export * from './github';
