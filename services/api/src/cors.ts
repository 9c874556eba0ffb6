import type { NestExpressApplication } from '@nestjs/platform-express';

/**
 * CORS for the REST API: off unless origins are configured (NEATROOTS_API_CORS_ORIGINS), so
 * by default a page on another origin cannot read the API with a key it holds. A configured
 * origin (or `*` for any) gets the headers it needs to send its key and JSON (and the MCP
 * headers, for a browser MCP client), and its
 * preflight is answered here, before the API key is asked for (a browser sends none with it).
 */

/** What the middleware uses of express's request and response (@types/express is not installed). */
interface Req {
  method: string;
  headers: Record<string, string | string[] | undefined>;
}
interface Res {
  setHeader(name: string, value: string): void;
  status(code: number): { end(): void };
}

const METHODS = 'GET, POST, PUT, DELETE';
/**
 * What a page may send: JSON with its key (x-api-key or Authorization: Bearer), and what a
 * browser MCP client sends to POST /v1/mcp besides (the MCP SDK's streamable HTTP transport:
 * accept, mcp-protocol-version after the handshake, mcp-session-id and last-event-id when it
 * has them). The MCP server's answer to initialize carries an mcp-session-id the client sends
 * back (it scopes the client's cancellations): a page may read it.
 */
const HEADERS = 'content-type, x-api-key, authorization, accept, mcp-protocol-version, mcp-session-id, last-event-id';
const EXPOSED = 'mcp-session-id';

export function allowCors(app: NestExpressApplication, origins: readonly string[]): void {
  if (origins.length === 0) return;
  const any = origins.includes('*');
  app.use((req: Req, res: Res, next: () => void) => {
    const origin = typeof req.headers.origin === 'string' ? req.headers.origin : undefined;
    if (!origin || !(any || origins.includes(origin))) return next();
    res.setHeader('Access-Control-Allow-Origin', any ? '*' : origin);
    res.setHeader('Vary', 'Origin');
    res.setHeader('Access-Control-Expose-Headers', EXPOSED);
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
      res.setHeader('Access-Control-Allow-Methods', METHODS);
      res.setHeader('Access-Control-Allow-Headers', HEADERS);
      res.setHeader('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  });
}
