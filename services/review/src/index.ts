export * from './review';
export * from './queries';
