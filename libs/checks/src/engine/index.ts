export * from './engine';
export * from './compile';
export * from './filter';
export * from './ids';
export * from './ruleset';
export * from './rules';
export * from './span-view';
export * from './window';
