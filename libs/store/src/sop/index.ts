export * from './workspace.repo';
export * from './sessions.repo';
export * from './run-sessions.repo';
export * from './errors';
export * from './queries';
export * from './lineage.repo';
export * from './lineage.queries';
