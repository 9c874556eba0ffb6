import { createMetrics, startAdmin, type AdminServer } from './admin';

/**
 * The admin port (/healthz, /readyz, /metrics, in every process of both deployments) sends the
 * security headers of a port that serves no page, on every answer: nothing may frame it or be
 * loaded by it, and no answer is sniffed into a script or a page. No X-Powered-By.
 */
const WANT = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-powered-by': null,
};
const seen = (res: Response) => Object.fromEntries(Object.keys(WANT).map((h) => [h, res.headers.get(h)]));

describe('the admin port: security headers', () => {
  let admin: AdminServer | undefined;
  let failing: string | undefined;
  afterAll(async () => {
    await admin?.close();
  });

  it('sends them on /healthz, /readyz, /metrics, a 404 and the answers of a failing process', async () => {
    let ready = true;
    admin = await startAdmin({ host: '127.0.0.1', port: 0, metrics: createMetrics('t'), ready: () => ready, failing: () => failing });
    const url = `http://127.0.0.1:${admin.port}`;
    const got = async (p: string) => {
      const res = await fetch(url + p);
      await res.arrayBuffer();
      return { p, status: res.status, headers: seen(res) };
    };
    for (const [p, status] of [['/healthz', 200], ['/readyz', 200], ['/metrics', 200], ['/nothing', 404]] as const) {
      expect(await got(p)).toEqual({ p, status, headers: WANT });
    }
    ready = false;
    expect(await got('/readyz')).toEqual({ p: '/readyz', status: 503, headers: WANT });
    failing = 'the bus is gone';
    expect(await got('/healthz')).toEqual({ p: '/healthz', status: 503, headers: WANT });
  });
});
