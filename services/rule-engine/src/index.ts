export * from './service';
export * from './module';
export { Prechecker, PrecheckTimeoutError, haltingTools, type PrecheckAnswer, type PrecheckRequest } from './precheck';
export { ruleEngineGrpcService, RuleEngineClient, RuleEngineUnavailableError, type PrecheckAnswerer } from './grpc';
