export * from './service';
export { startQuestionGrpc, questionGrpcService, answerToProto, type QuestionGrpc } from './grpc';
