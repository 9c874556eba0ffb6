export * from './inline';
export * from './bullmq';
export { nextCronTime } from './common';
