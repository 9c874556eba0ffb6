export { main } from './cli';
export { startEmbedded, DEMO_PROJECT, type EmbeddedApp, type EmbeddedOptions } from './embedded';
export { Replayer, Summary, readItems, findingLine } from './replay';
export { startNeatroots, SERVICES, type ServiceName, type NeatrootsOptions } from './compose';
export { serverNodeFlags } from './relaunch';
