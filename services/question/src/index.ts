export * from './service';
export { startQuestionGrpc, questionGrpcService, answerToProto, agreementStats, type QuestionGrpc } from './grpc';
export * from './module';
