import type { NestExpressApplication } from '@nestjs/platform-express';

/**
 * The headers every answer of the api carries, the web app's pages and files and the API's
 * JSON alike (docs/deployment.md, Security headers). A reverse proxy in front may add its own.
 *
 * The policy is what the app needs and no more: its script and stylesheet are files of its
 * build (/assets, no inline script or style: React sets styles through the CSSOM, which
 * style-src does not govern), its only image is the empty data: favicon of index.html, it
 * calls the API on its own origin (connect-src falls back to default-src), and it is never
 * shown in another site's frame: its buttons (Dismiss, Apply, Switch to halt) cannot be
 * clicked through a page that frames it.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "img-src 'self' data:",
  "style-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  // frame-ancestors, for browsers that read only this.
  'X-Frame-Options': 'DENY',
  // A JSON answer or a file is never read as a script or a page whatever it holds.
  'X-Content-Type-Options': 'nosniff',
  // A link followed out of the app (a pull request) does not carry the run's or pattern's path.
  'Referrer-Policy': 'same-origin',
};

interface Res {
  setHeader(name: string, value: string): void;
}

/** Sets SECURITY_HEADERS on every answer (first of the middleware: refusals and errors too) and drops X-Powered-By. */
export function securityHeaders(app: NestExpressApplication): void {
  app.disable('x-powered-by');
  app.use((_req: unknown, res: Res, next: () => void) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    next();
  });
}
