import type { NestExpressApplication } from '@nestjs/platform-express';
import { openApiDocument } from './document';

/** What the handler uses of express's request and response (@types/express is not installed). */
interface Req {
  method: string;
  path: string;
}
interface Res {
  setHeader(name: string, value: string): void;
  type(t: string): Res;
  send(body: string): void;
}

export const OPENAPI_PATH = '/openapi.json';

/** GET /openapi.json: the document, for anyone (no API key: it holds no project's data). */
export function serveOpenApi(app: NestExpressApplication): void {
  const body = JSON.stringify(openApiDocument(), null, 2);
  app.use((req: Req, res: Res, next: (err?: unknown) => void) => {
    if (req.path !== OPENAPI_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
    res.setHeader('Cache-Control', 'no-cache');
    res.type('application/json; charset=utf-8').send(body);
  });
}
