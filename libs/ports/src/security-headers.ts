/**
 * The security headers of the ports that serve no page: the admin port (/healthz, /readyz,
 * /metrics) and OTLP/HTTP (/v1/traces). The api's port sends its own, with the web app's policy
 * (services/api/src/security-headers.ts); these are the ones that make sense for JSON, protobuf
 * and metrics text: nothing here is a page, so nothing may be loaded by it or frame it, and no
 * answer is sniffed into a script or a page whatever it holds (docs/deployment.md, Security
 * headers). node's own server sends no X-Powered-By.
 */
export const PLAIN_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  // frame-ancestors, for browsers that read only this.
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** Sets PLAIN_SECURITY_HEADERS on an answer (first, so refusals and errors carry them too). */
export function setPlainSecurityHeaders(res: { setHeader(name: string, value: string): unknown }): void {
  for (const name in PLAIN_SECURITY_HEADERS) res.setHeader(name, PLAIN_SECURITY_HEADERS[name]);
}
