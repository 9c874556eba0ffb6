export * from './service';
export { startQuestionGrpc, questionGrpcService, answerToProto, agreementStats, type QuestionGrpc } from './grpc';
export * from './module';
export { answererDecisions, callDeadlineMs, chatDeadlineMs, decisionDeadlineMs, modelRequestMs, QuestionDecisionsClient, type DecisionsGateway, type DecisionsClientOptions, type ModelTimeouts } from './decisions';
