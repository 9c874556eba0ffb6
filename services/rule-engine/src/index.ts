export * from './service';
export * from './module';
