export * from './disabled';
export * from './pool';
export * from './safe-matching';
export * from './state-file';
export * from './shared-board';
