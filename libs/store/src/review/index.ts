export * from './queries';
export * from './patterns.repo';
export * from './review-read.repo';
export * from './clusters.repo';
