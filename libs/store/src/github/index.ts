export * from './secret-box';
export * from './repo-connections.repo';
