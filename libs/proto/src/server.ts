/** Serving gRPC: what every process with a gRPC server shares. */
import { ServerCredentials, setLogger, type Server } from '@grpc/grpc-js';
// grpc-js's index exports setLogger only; its logging module has the logger in use.
import { getLogger } from '@grpc/grpc-js/build/src/logging';

/**
 * grpc-js logs a bind that found no address it could listen on ('E No address added out of
 * total 1 resolved') on stderr itself, before the bind fails with the same words and each
 * address's reason (EADDRINUSE ...), which the caller says in its own words (neatroots start:
 * "port N (VAR) is already in use ..."). While binds run, that one line is dropped; every other
 * line of grpc-js's goes to its logger as before.
 */
const NO_ADDRESS = /^No address added out of total \d+ resolved/;
let binding = 0;
let restore: (() => void) | undefined;

function quietBinds(): () => void {
  if (binding++ === 0) {
    const logger = getLogger();
    const filter: typeof logger = {
      debug: (...a: unknown[]) => logger.debug?.(...a),
      info: (...a: unknown[]) => logger.info?.(...a),
      error: (...a: unknown[]) => {
        if (typeof a[0] !== 'string' || !NO_ADDRESS.test(a[0])) (logger.error ?? console.error)(...a);
      },
    };
    setLogger(filter);
    // A logger someone else set meanwhile stays.
    restore = () => getLogger() === filter && setLogger(logger);
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--binding === 0) restore?.();
  };
}

/** Binds `server` on host:port (0 picks a free port); resolves with the port bound. */
export function bindGrpc(server: Server, host: string, port: number): Promise<number> {
  const address = `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  const loud = quietBinds();
  return new Promise<number>((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  ).finally(loud);
}

/**
 * Stops a gRPC server gracefully: no new calls, the calls in progress finish; after `graceMs`
 * the rest are cancelled (a stuck stream must not hold a shutdown forever).
 */
export function closeGrpcServer(server: Server, graceMs = 5_000): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(t);
      resolve();
    });
  });
}
