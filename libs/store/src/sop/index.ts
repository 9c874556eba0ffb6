export * from './workspace.repo';
export * from './sessions.repo';
