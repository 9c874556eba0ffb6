/**
 * @neatroots/sop: procedures as files (sopc's parser and compiler, lock.json), the status and
 * result rules of a procedure check, and the checker behind a Decider port.
 */
export * from './types';
export { ruleId, contentVersion, collapse } from './ids';
export { splitAnnotation, type Annotation } from './annotations';
export { parseProcedure, type ParsedProcedure } from './procedure';
export { parseAgentFile, parseGroupFile, type AgentFile, type GroupFile, type Ref } from './yaml-files';
export { compileFiles, compileFolder, readFolder, FolderError, NAME_PATTERN } from './compile';
export { compileInstructions } from './instructions';
export { toLock, lockText, type Lock, type LockAgent, type LockProcedure, type LockRule } from './lock';
export * from './body';
export { parseSession, agentSpoke, SessionError, type Session, type Turn, type ToolCall } from './session';
export * from './decider';
export type { StepObservation, NeverObservation, WarningObservation, Observation } from './status/observation';
export { stepStatuses, type Derived } from './status/steps';
export { outOfOrder, type Placed } from './status/out-of-order';
export { neverStatus } from './status/never';
export { warningStatus } from './status/warning';
export { agentQuotes } from './status/quotes';
export { procedureResult, resultWithSuppressed, excludedReason, sessionResult, isFinding, counts, type RolledRule, type Counts } from './result';
export { fromToolCalls, stepCalls } from './tool-calls';
export { checkSession, checkProcedure, UnknownAgentError, type CheckFolder, type CheckOptions, type DecisionRecord, type ModelFailure } from './checker';
export { recordedDecider, questionKey, type Recorded, type RecordedAnswer } from './recorded-decider';
export { createCheckSession, type CheckSessionFn, type CheckSessionArgs, type CheckSessionOptions } from './models/check-session';
export { QuestionBands, questionWording, NO_FITTED_BANDS, type QuestionBand } from './models/bands';
export type { DecisionGateway, DecisionItem, DecisionEndpoint, DecisionReply } from './models/gateway';
export { loadSopSettings, inBand, SopSettingsError, DEFAULT_DECISIONS, DEFAULT_SOP_SETTINGS, BAND_KINDS, type SopModelSettings, type DecisionSettings, type Band, type BandKind, type CheckMode } from './models/settings';
export { modelDecider, modelReviewer, reasoningDecider, retryableModelFailure } from './models/deciders';
export { readModelAnswer, unusableModelAnswer, ANSWER_FORMATS, MalformedAnswer, type ModelAnswer } from './models/parse';
export { DECIDE_VERSION, CHECK_VERSION, DECIDE_INSTRUCTIONS, CHECK_INSTRUCTIONS, DEFAULT_SUBJECT_CHARS, renderSubject, askText, reviewAskText } from './models/prompt';
export { sessionFromRun, runExternalId, type RunLike, type RunSpanLike } from './from-run';
