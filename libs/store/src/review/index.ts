export * from './queries';
export * from './patterns.repo';
export * from './review-read.repo';
export * from './clusters.repo';
export * from './suggestions.repo';
export * from './suggestions';
export * from './calibration';
export * from './calibration.repo';
