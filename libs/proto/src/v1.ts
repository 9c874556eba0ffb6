/**
 * The neatroots.v1 package in one flat namespace. The three generated files each repeat
 * helper names (protobufPackage, MessageFns, DeepPartial), so `export *` of all of them
 * would collide; the messages and services are listed instead.
 */
export { Usage, Span, ToolInfo, RunStart, RunEnd, Event } from './gen/neatroots/v1/spans';
export {
  ExportRequest,
  Rejected,
  ExportResponse,
  SubscribeRequest,
  Note,
  PreCheckRequest,
  PreCheckResponse,
  PreCheckPolicyRequest,
  PreCheckPolicyResponse,
  IngestService,
  IngestClient,
} from './gen/neatroots/v1/ingest';
export type { IngestServer } from './gen/neatroots/v1/ingest';
export { Envelope, FindingEvent, NoteDelivered, NoteEnvelope } from './gen/neatroots/v1/bus';
export { EnginePreCheckRequest, HaltingToolsRequest, HaltingToolsResponse, RuleEngineService, RuleEngineClient } from './gen/neatroots/v1/rule_engine';
export type { RuleEngineServer } from './gen/neatroots/v1/rule_engine';
export {
  QuestionSpec,
  AskRequest,
  AskResponse,
  Answer,
  AskBatchRequest,
  AskBatchResponse,
  ChatMessage,
  CompleteRequest,
  CompleteResponse,
  AgreementRequest,
  AgreementStat,
  AgreementResponse,
  DecideRequest,
  DecideResponse,
  DecisionModelsRequest,
  DecisionModelsResponse,
  QuestionTask,
  QuestionTasks,
  QuestionService,
  QuestionClient,
} from './gen/neatroots/v1/question';
export type { QuestionServer } from './gen/neatroots/v1/question';
export {
  ProjectRequest,
  ListRunsRequest,
  GetRunRequest,
  GetSpanRequest,
  ListSpansRequest,
  ListFindingsRequest,
  FindingActionRequest,
  JsonReply,
  ResolveKeyRequest,
  ResolveKeyReply,
  ListDeadLettersRequest,
  ReviewService,
  ReviewClient,
  JsonRequest,
  KeysRequest,
  PlanRequest,
  CheckIdsReply,
  SteeringReply,
  ReviewDataService,
  ReviewDataClient,
} from './gen/neatroots/v1/review';
export type { ReviewServer, ReviewDataServer } from './gen/neatroots/v1/review';
export const protobufPackage = 'neatroots.v1';
export {
  WorkspaceRequest,
  HeadFileRequest,
  PushHeadRequest,
  HeadFile,
  ReleaseRequest,
  ReceiveSessionRequest,
  SessionRequest,
  ListSessionsRequest,
  ReviewCall,
  SopService,
  SopClient,
} from './gen/neatroots/v1/sop';
