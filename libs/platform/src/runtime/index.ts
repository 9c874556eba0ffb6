export * from './log';
export * from './platforms';
export * from './start';
export * from './replay-platform';
export * from './internal-token';
