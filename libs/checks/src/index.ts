export * from './types';
export * from './guidance';
export * from './regex';
export * from './match';
export * from './schema';
export * from './sources';
export * from './watch';
export * from './engine';
