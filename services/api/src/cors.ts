import type { NestExpressApplication } from '@nestjs/platform-express';

/**
 * CORS for the REST API: off unless origins are configured (NEATROOTS_API_CORS_ORIGINS), so
 * by default a page on another origin cannot read the API with a key it holds. A configured
 * origin (or `*` for any) gets the headers it needs to send x-api-key and JSON, and its
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
const HEADERS = 'content-type, x-api-key';

export function allowCors(app: NestExpressApplication, origins: readonly string[]): void {
  if (origins.length === 0) return;
  const any = origins.includes('*');
  app.use((req: Req, res: Res, next: () => void) => {
    const origin = typeof req.headers.origin === 'string' ? req.headers.origin : undefined;
    if (!origin || !(any || origins.includes(origin))) return next();
    res.setHeader('Access-Control-Allow-Origin', any ? '*' : origin);
    res.setHeader('Vary', 'Origin');
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
