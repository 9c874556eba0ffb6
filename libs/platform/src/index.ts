export * from './bus/memory';
export * from './bus/partition';
export * from './windows/memory';
export * from './config';
export * from './db';
