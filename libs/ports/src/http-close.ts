import type { Server } from 'node:http';

/**
 * Closes an HTTP server under keep-alive load: stops listening, closes the idle connections at
 * once, lets the requests in hand finish, and cuts whatever is still open after `graceMs`.
 * Node's `server.close()` alone keeps serving a connection whose client sends again as soon as
 * it is answered; the server's own handler must also answer with `Connection: close` once
 * closing (each server marks that itself: ingest's OTLP/HTTP, the api, the admin port).
 */
export function drainHttpServer(server: Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    cut.unref();
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
  });
}
