import * as fs from 'node:fs';
import * as path from 'node:path';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { serveOpenApi } from './openapi/serve';

/**
 * The web app (packages/web, built by `npm install`/`npm run build` into its dist/) served at
 * `/`: its files as they are, and index.html for any other page of the app (its routes live in
 * the browser, so a shared link such as /p/shop/runs/r1 must load the app). The API's own paths
 * never reach the app: an unknown /v1 route stays a JSON 404.
 */

/**
 * Paths the app never answers (the API, its OpenAPI document, and the admin port's endpoints
 * should one share a port): in any case, as express routes them (/V1/Projects/... is the API's).
 */
const RESERVED = /^\/(v1|healthz|readyz|metrics|openapi\.json)(\/|$)/i;

/** The app's pages (/p/{project}/...): never a file of the build, whatever their last part looks like. */
const APP_PAGES = /^\/p\//;

const MISSING =
  'The neatroots web app is not built here. Run `npm run build` (or `npm install`) in the neatroots ' +
  'folder, then reload. The REST API under /v1 works without it.\n';

/** What the middleware reads and writes of express's request and response (@types/express is not installed). */
interface Req {
  method: string;
  path: string;
}
interface Res {
  status(code: number): Res;
  type(t: string): Res;
  setHeader(name: string, value: string): void;
  send(body: string): void;
  sendFile(file: string, cb: (err?: Error) => void): void;
}
type Next = (err?: unknown) => void;

/** Where the web package put its build, or null when the package is not installed beside the api. */
export function defaultAppDir(): string | null {
  try {
    // Resolved at run time, not imported: the api runs without the app (a packed CLI, a bare api).
    return path.join(path.dirname(require.resolve('@neatroots/web/package.json')), 'dist');
  } catch {
    return null;
  }
}

/**
 * Serves the app from `dir`. A missing build answers 503 with what to run, on every page of
 * the app, instead of a bare 404 (or a crash at boot): the API keeps working.
 */
export function serveApp(app: NestExpressApplication, dir: string | null): void {
  // The API's own static document first: the app's files never shadow it.
  serveOpenApi(app);
  const index = dir ? path.join(dir, 'index.html') : null;
  if (dir) {
    // Its files first (express.static, falling through when there is none): hashed assets kept for good.
    app.useStaticAssets(dir, {
      index: false,
      setHeaders: (res: Res, file: string) => {
        res.setHeader('Cache-Control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    });
  }
  app.use((req: Req, res: Res, next: Next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || RESERVED.test(req.path)) return next();
    // Checked per request: a build finished after the api started is served without a restart.
    if (!index || !fs.existsSync(index)) {
      res.status(503).type('text/plain; charset=utf-8').send(MISSING);
      return;
    }
    // A file name that is not there (a stale hashed asset) is a 404, not the app's page. The
    // app's own pages are under /p/ and hold no files: a dot there is part of an id (a run
    // job-3.1, a project my.app), so every path under /p/ is the app's page.
    if (!APP_PAGES.test(req.path) && /\.[A-Za-z0-9]+$/.test(req.path)) return next();
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index, (err) => err && next(err));
  });
}
