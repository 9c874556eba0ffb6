export * from './service';
export { startQuestionGrpc, questionGrpcService, answerToProto, agreementStats, type QuestionGrpc } from './grpc';
export * from './module';
export { answererDecisions, QuestionDecisionsClient, type DecisionsGateway, type DecisionsClientOptions } from './decisions';
