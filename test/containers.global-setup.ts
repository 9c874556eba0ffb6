import { startContainers } from '../libs/platform/src/testing/containers';

/**
 * jest's global setup for the integration project: where no service address is given and a
 * Docker engine is reachable, testcontainers starts the missing services and their addresses
 * go into the environment the test files (and their worker processes) read. Without Docker it
 * starts nothing and notes why, for the skip lines. Stopped by containers.global-teardown.ts.
 */
export default async function setup(): Promise<void> {
  const r = await startContainers(process.env);
  (globalThis as { __neatrootsContainers?: typeof r }).__neatrootsContainers = r;
  const names = Object.keys(r.started);
  if (names.length) process.stderr.write(`testcontainers started ${names.join(', ')} for the integration tests\n`);
}
