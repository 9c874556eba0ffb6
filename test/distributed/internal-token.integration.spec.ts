import { credentials, Metadata, status as Status } from '@grpc/grpc-js';
import { requireService, until } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { Cluster, type ServiceProc } from './cluster';

/**
 * A NEATROOTS_INTERNAL_TOKEN that differs between the services: review (the cluster's token)
 * refuses the calls of an ingest and an api given another. They must say so rather than look
 * healthy and fail every call: /readyz 503 naming the variable (so a rollout with the wrong
 * token stops there), an export refused with a message that says the token does not match (not
 * that none was carried), ingest's log saying it once, and the api answering 503 naming the
 * misconfiguration instead of 500 "internal error".
 */
const SUITE = 'distributed: a wrong NEATROOTS_INTERNAL_TOKEN';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `tok-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;
const WRONG_TOKEN = 'not-the-deployment-internal-token';

/** A cluster whose processes given a wrong token are waited for until their admin port answers, not until ready. */
class Misconfigured extends Cluster {
  override async ready(sp: ServiceProc, timeoutMs = 60_000): Promise<void> {
    if (sp.target !== 'ingest' && sp.target !== 'api') return super.ready(sp, timeoutMs);
    await until(`${sp.target}'s admin port`, async () => {
      if (sp.proc.exitCode !== null) throw new Error(`${sp.target} exited ${sp.proc.exitCode}:\n${sp.output.join('')}`);
      return fetch(`http://127.0.0.1:${sp.adminPort}/healthz`).then((r) => r.ok, () => false);
    }, timeoutMs);
  }
}

/** /readyz, once it answers with an error (the first answers may come before the services said they serve). */
async function notReady(sp: ServiceProc): Promise<{ status: number; body: { status: string; error: string } }> {
  return until(`${sp.target}'s /readyz to name its error`, async () => {
    const res = await fetch(`http://127.0.0.1:${sp.adminPort}/readyz`);
    const body = (await res.json()) as { status: string; error?: string };
    return body.error !== undefined || res.ok ? { status: res.status, body: body as { status: string; error: string } } : undefined;
  }, 60_000);
}

maybe(SUITE, () => {
  let cluster: Misconfigured;
  let ingest: ServiceProc;
  let api: ServiceProc;

  beforeAll(async () => {
    cluster = new Misconfigured({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    await cluster.start('review');
    [ingest, api] = await Promise.all([cluster.start('ingest', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN }), cluster.start('api', { NEATROOTS_INTERNAL_TOKEN: WRONG_TOKEN })]);
  }, 180_000);

  afterAll(async () => {
    await cluster?.close();
  }, 120_000);

  it('ingest and the api are not ready: /readyz 503 naming NEATROOTS_INTERNAL_TOKEN and that the token does not match', async () => {
    for (const sp of [ingest, api]) {
      const ready = await notReady(sp);
      expect([sp.target, ready.status, ready.body.status]).toEqual([sp.target, 503, 'not ready']);
      expect(ready.body.error).toMatch(/^Error: the review service \(127\.0\.0\.1:\d+\) refuses this process's calls: .*does not match this service's NEATROOTS_INTERNAL_TOKEN/);
      expect(ready.body.error).not.toContain(WRONG_TOKEN);
      expect(ready.body.error).not.toContain(cluster.env.NEATROOTS_INTERNAL_TOKEN);
    }
  });

  it('an export is refused UNAVAILABLE saying the token does not match, and ingest logs it once for repeated exports', async () => {
    const client = new v1.IngestClient(`127.0.0.1:${cluster.ports.grpc}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    const exportOnce = () =>
      new Promise<{ code: number; details: string } | null>((resolve) =>
        // The key is checked before the message is read: what it holds does not matter.
        client.export({ events: [], note_runs: [] }, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)),
      );
    try {
      const errors = [await exportOnce(), await exportOnce(), await exportOnce()];
      for (const err of errors) {
        expect(err?.code).toBe(Status.UNAVAILABLE);
        expect(err?.details).toMatch(/^cannot check the API key right now \(the review service refuses this process's calls, a misconfiguration: .*carried an internal token \(x-neatroots-internal-token\) that does not match this service's NEATROOTS_INTERNAL_TOKEN/);
        expect(err?.details).not.toContain(WRONG_TOKEN);
      }
    } finally {
      client.close();
    }
    // Stopped, and its output read to the end: one line for the three refusals.
    const closed = new Promise((r) => ingest.proc.once('close', r));
    await cluster.stop(ingest);
    await closed;
    const lines = ingest.output.join('').split('\n').filter((l) => l.includes('cannot check API keys'));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]) as { level: string; service: string; msg: string };
    expect([line.level, line.service]).toEqual(['error', 'ingest']);
    expect(line.msg).toMatch(/does not match this service's NEATROOTS_INTERNAL_TOKEN/);
  });

  it('the api answers 503 naming the misconfiguration, with Retry-After, not 500 internal', async () => {
    for (const key of [KEY, 'a-key-nobody-has']) {
      const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/runs`, { headers: { 'x-api-key': key } });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect([res.status, body.error.code, res.headers.get('retry-after')]).toEqual([503, 'unavailable', '5']);
      expect(body.error.message).toMatch(/^the review service refuses this process's calls, a misconfiguration: .*does not match this service's NEATROOTS_INTERNAL_TOKEN/);
    }
  });
});
