import { Server, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import type { GrpcService, Logger, Platform, Running, ServiceContext, ServiceModule } from '@neatroots/ports';
import type { Config } from '../config';
import { HealthService, startAdmin, type Metrics } from '../ops';
import { bindGrpc, closeGrpcServer } from '@neatroots/proto';
import { warnWhileSlow } from './log';
import { requireInternalToken, TokenlessCalls } from './internal-token';

/**
 * Supplies a link no module of this process provides. It may use other links; `onClose`
 * registers its clean-up (run after the modules stopped); `onReady` a readiness check of the
 * process (false or a throw: /readyz 503, with the error), e.g. that the service it reaches
 * takes its calls.
 */
export type LinkFactory = (tools: {
  link<T>(name: string): Promise<T>;
  onClose(step: () => unknown): void;
  onReady(check: () => boolean | Promise<boolean>): void;
}) => unknown;

export interface StartServicesOptions {
  platform: Platform;
  modules: readonly ServiceModule<Config>[];
  config: Config;
  log: Logger;
  metrics: Metrics;
  /** Links supplied by the composition root: clients of services elsewhere, shared resources. */
  links?: Record<string, LinkFactory>;
  /**
   * Where the modules' gRPC services (and grpc.health.v1) are served; absent: not at all.
   * requestBytes: the largest request the port takes (grpc.max_receive_message_length); absent:
   * grpc-js's default, 4 MiB. grpc-js reads a request whole before the internal token is checked,
   * so a larger bound lets a caller without the token make the process hold that much per call:
   * give it only to the port that needs it (review's, compose.ts).
   */
  grpc?: { host: string; port: number; requestBytes?: number };
  /** /healthz, /readyz and /metrics; absent: not served (replay, a command that listens on nothing). */
  admin?: { host: string; port: number };
}

export interface Services {
  /** Each module's handle, by name, in start order. */
  running: ReadonlyMap<string, Running>;
  /** Every module's ports, merged. */
  ports: Record<string, number>;
  /** The admin port, when served. */
  adminPort?: number;
  /** The gRPC service port, when served. */
  servicePort?: number;
  health: HealthService;
  /** Resolves with the reason once a part of the process stopped for good (Platform.failing); never otherwise. */
  failed: Promise<string>;
  link<T>(name: string): Promise<T>;
  /**
   * Ordered shutdown: the process turns not ready (/readyz 503, gRPC health NOT_SERVING) and goes
   * on serving for NEATROOTS_SHUTDOWN_DELAY_MS, then stops accepting (the edges together, then its
   * gRPC server), the platform drains, the other modules finish what they hold and flush, the
   * links and drivers close, then the admin port. Running it twice runs it once.
   */
  close(): Promise<void>;
}

/** The modules in the order they start: providers before what needs them, edges last. */
export function startOrder<M extends Pick<ServiceModule, 'name' | 'needs' | 'provides' | 'edge'>>(modules: readonly M[]): M[] {
  const provider = new Map<string, M>();
  for (const m of modules) for (const p of m.provides ?? []) provider.set(p, m);
  const out: M[] = [];
  const state = new Map<M, 'visiting' | 'done'>();
  const visit = (m: M, trail: string[]) => {
    if (state.get(m) === 'done') return;
    if (state.get(m) === 'visiting') throw new Error(`services need each other in a cycle: ${[...trail, m.name].join(' -> ')}`);
    state.set(m, 'visiting');
    for (const n of m.needs) {
      const p = provider.get(n);
      if (p && p !== m) visit(p, [...trail, m.name]);
    }
    state.set(m, 'done');
    out.push(m);
  };
  for (const m of modules.filter((x) => !x.edge)) visit(m, []);
  for (const m of modules.filter((x) => x.edge)) visit(m, []);
  return out;
}

/**
 * Starts `modules` on `platform`: the one function behind `neatroots start`, `serve --target X`
 * and the tests. A module that fails to start stops the ones already started.
 */
export async function startServices(opts: StartServicesOptions): Promise<Services> {
  const { platform, config, log, metrics } = opts;
  const order = startOrder(opts.modules);
  const health = new HealthService();
  const grpcServer = opts.grpc ? new Server(opts.grpc.requestBytes ? { 'grpc.max_receive_message_length': opts.grpc.requestBytes } : {}) : undefined;
  if (grpcServer) grpcServer.addService(health.definition().service, health.definition().implementation);
  const running = new Map<string, Running>();
  const provided = new Map<string, unknown>();
  const pending = new Set(order.flatMap((m) => m.provides ?? []));
  const supplied = new Map<string, Promise<unknown>>();
  const linkClosers: (() => unknown)[] = [];
  const linkChecks: (() => boolean | Promise<boolean>)[] = [];

  const link = async <T>(name: string): Promise<T> => {
    if (provided.has(name)) return provided.get(name) as T;
    if (pending.has(name)) throw new Error(`${name}: needed before the module that provides it started (list it in needs)`);
    const make = opts.links?.[name];
    if (!make) throw new Error(`${name}: no service of this process provides it, and there is no link to one elsewhere`);
    if (!supplied.has(name)) supplied.set(name, Promise.resolve().then(() => make({ link, onClose: (step) => void linkClosers.push(step), onReady: (check) => void linkChecks.push(check) })));
    return (await supplied.get(name)) as T;
  };

  const serviceNames: string[] = [];
  const tokenRequired = config.NEATROOTS_INTERNAL_TOKEN_REQUIRED !== false;
  const tokenless = new TokenlessCalls(log);
  const contextFor = (m: ServiceModule<Config>): ServiceContext<Config> => ({
    config,
    log: log.child({ service: m.name }),
    metrics,
    platform,
    serveGrpc: (name: string, svc: GrpcService) => {
      if (!grpcServer) return;
      if (config.NEATROOTS_INTERNAL_TOKEN && !tokenRequired && !serviceNames.length) {
        log.warn('NEATROOTS_INTERNAL_TOKEN_REQUIRED=false: this process\'s gRPC ports take calls without the internal token (a rolling upgrade from a build before it), each method so called logged at most once a minute; set it back to true once every service runs this build');
      }
      grpcServer.addService(svc.service as ServiceDefinition, requireInternalToken(svc.implementation as UntypedServiceImplementation, config.NEATROOTS_INTERNAL_TOKEN, { required: tokenRequired, service: name, tokenless }));
      serviceNames.push(name);
    },
    setHealth: (name: string, serving: boolean) => health.set(name, serving ? 'SERVING' : 'NOT_SERVING'),
    link,
  });

  let servicePort: number | undefined;
  /** Everything started and was said to be serving: a stop from then on waits NEATROOTS_SHUTDOWN_DELAY_MS. */
  let serving = false;
  let admin: { port: number; close(): Promise<void> } | undefined;
  let closing: Promise<void> | undefined;
  // A part that stopped for good (a disk error, Platform.failing): said once in the log, and by
  // gRPC health as well as /healthz, so that a supervisor starts the process again.
  let failed = false;
  let sayFailed!: (why: string) => void;
  const failedOnce = new Promise<string>((r) => (sayFailed = r));
  const watch = setInterval(() => {
    const why = platform.failing?.();
    if (!why || failed || closing) return;
    failed = true;
    sayFailed(why);
    metrics.failing.set(1);
    log.error(`${why}: this process cannot go on until it is started again; its health checks now fail`);
    health.setAll('NOT_SERVING');
  }, 1_000);
  watch.unref();
  const step = async (what: string, fn: () => unknown) => {
    try {
      await warnWhileSlow(log, `shutdown: ${what}`, fn);
    } catch (err) {
      log.error(`shutdown: ${what} failed`, err);
    }
  };
  const close = () =>
    (closing ??= (async () => {
      clearInterval(watch);
      health.setAll('NOT_SERVING');
      // Not ready, still serving: a load balancer (kube-proxy, an ingress) goes on sending new
      // connections here for a moment after readiness fails; they are answered, not refused.
      // Not when it never served, or once a part stopped for good (its health failed already).
      const delayMs = config.NEATROOTS_SHUTDOWN_DELAY_MS;
      if (delayMs > 0 && serving && !failed) {
        log.info(`shutdown: not ready (/readyz 503, gRPC health NOT_SERVING), serving for ${delayMs} ms more before closing (NEATROOTS_SHUTDOWN_DELAY_MS); a second signal stops at once`);
        await new Promise((r) => setTimeout(r, delayMs));
      }
      const started = order.filter((m) => running.has(m.name)).reverse();
      // The edges stop accepting together: one that takes its grace to close (an HTTP client
      // sending on its connection) must not keep another's ports open meanwhile.
      await Promise.all(started.filter((x) => x.edge).map((m) => step(m.name, () => running.get(m.name)!.stop())));
      if (grpcServer && servicePort !== undefined) await step('gRPC server', () => closeGrpcServer(grpcServer));
      // Bounded by the platform (NEATROOTS_DRAIN_MS embedded; Kafka keeps what is left).
      await step('drain', () => platform.drain());
      for (const m of started.filter((x) => !x.edge)) await step(m.name, () => running.get(m.name)!.stop());
      for (const c of linkClosers.reverse()) await step('link', c);
      await step('platform', () => platform.close());
      if (admin) await step('admin', () => admin!.close());
    })());

  try {
    // The drivers readiness asks: those the process's modules serve from (all of them when one
    // does not say; see ServiceModule.readyOn).
    const readyOn = opts.modules.every((m) => m.readyOn) ? [...new Set(opts.modules.flatMap((m) => m.readyOn!))] : undefined;
    // Open before the modules start: a start may take long (review migrating the database, or
    // waiting for another replica's migration), and a closed admin port meanwhile fails the
    // startup and liveness probes, which restart the process and roll the migration back. Alive
    // (/healthz 200) and not ready (/readyz 503, saying what a driver opening does) until started.
    if (opts.admin) admin = await startAdmin({
      host: opts.admin.host,
      port: opts.admin.port,
      metrics,
      failing: () => platform.failing?.(),
      ready: async () => {
        if (!serving) return (await platform.ready(readyOn)) && false;
        return (
          health.get() === 'SERVING' &&
          (await platform.ready(readyOn)) &&
          (await Promise.all([...[...running.values()].map((r) => (r.ready ? r.ready() : true)), ...linkChecks.map((check) => check())])).every(Boolean)
        );
      },
    });
    for (const m of order) {
      const r = await m.start(contextFor(m));
      running.set(m.name, r);
      for (const [name, value] of Object.entries(r.provides ?? {})) {
        provided.set(name, value);
        pending.delete(name);
      }
    }
    if (grpcServer) servicePort = await bindGrpc(grpcServer, opts.grpc!.host, opts.grpc!.port);
    // Not if a part already stopped for good while the others started (the watcher said so).
    if (!failed) {
      for (const name of serviceNames) health.set(name, 'SERVING');
      health.set('', 'SERVING');
    }
    serving = true;
  } catch (err) {
    await close();
    throw err;
  }
  return {
    running,
    ports: Object.assign({}, ...[...running.values()].map((r) => r.ports ?? {})),
    adminPort: admin?.port,
    servicePort,
    health,
    failed: failedOnce,
    link,
    close,
  };
}
