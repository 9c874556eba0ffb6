/** Serving gRPC: what every process with a gRPC server shares. */
import { ServerCredentials, type Server } from '@grpc/grpc-js';

/** Binds `server` on host:port (0 picks a free port); resolves with the port bound. */
export function bindGrpc(server: Server, host: string, port: number): Promise<number> {
  const address = `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  return new Promise((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
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
