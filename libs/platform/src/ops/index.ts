export * from './admin';
export * from './health';
