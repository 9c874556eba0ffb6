export * from './service';
export * from './module';
export { Prechecker, PrecheckTimeoutError, haltingTools, type PrecheckAnswer, type PrecheckRequest } from './precheck';
