export * from './review';
export * from './queries';
export * from './grpc';
