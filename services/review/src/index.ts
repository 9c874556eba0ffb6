export * from './review';
export * from './queries';
export * from './grpc';
export * from './data';
export * from './data-grpc';
export * from './module';
