export * from './types';
export * from './errors';
export * from './normalize';
export * from './limits';
export * from './jsonl';
export * from './text';
export * from './wire';
export * from './otlp';
