export * from './bus';
export * from './windows';
export * from './db';
export * from './clock';
export * from './models';
export * from './jobs';
export * from './dead-letters';
export * from './module';
