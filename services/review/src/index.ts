export * from './review';
export * from './queries';
export * from './grpc';
export * from './data';
export * from './data-grpc';
export * from './module';
export * from './sop/service';
export * from './sop/grpc';
export { SOP_CHECK_QUEUE, type CheckSession } from './sop/sessions';
