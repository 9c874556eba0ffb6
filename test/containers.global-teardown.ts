import type { StartedContainers } from '../libs/platform/src/testing/containers';

/** Stops what containers.global-setup.ts started. */
export default async function teardown(): Promise<void> {
  await (globalThis as { __neatrootsContainers?: StartedContainers }).__neatrootsContainers?.stop();
}
