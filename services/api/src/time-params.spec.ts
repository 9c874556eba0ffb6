/**
 * from and to through the api (PGlite, the review service in-process): a year before 100 is that
 * year (not 19xx), year 0000 and an instant outside 0001-01-01..9999-12-31 UTC are refused with
 * 400 naming the parameter (one past 9999 once was a 500 from Postgres), on the runs and sessions
 * lists and on the review window (patterns, insights).
 */
import type { INestApplication } from '@nestjs/common';
import { fixtureFolder, fixtureSession, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

const KEY = 'key-for-w1';
let h: SopHarness;
let app: INestApplication;
let url: string;

const call = (path: string) => send(`${url}${path}`, 'GET', KEY);

beforeAll(async () => {
  h = await startSopHarness({ w1: KEY });
  ({ app, url } = await startApiOn(h.db, 'w1', h.sop.queries, h.sop.review));
}, 60_000);

afterAll(async () => {
  await app?.close();
  await h?.close();
});

const LISTS = ['/v1/projects/w1/runs', '/v1/workspaces/w1/sessions', '/v1/workspaces/w1/patterns', '/v1/workspaces/w1/insights'];

describe('from and to', () => {
  it('refuse year 0000 and times outside 0001-9999 in UTC with 400 naming the parameter', async () => {
    for (const list of LISTS) {
      for (const [name, v] of [
        ['from', '9999-12-31T23:30:00-01:00'],
        ['to', '9999-12-31T23:30:00-01:00'],
        ['from', '0000-01-01'],
        ['to', '0000-06-01T00:00:00Z'],
        ['from', '0001-01-01T00:30:00+01:00'],
      ]) {
        const res = await call(`${list}?${name}=${encodeURIComponent(v)}`);
        expect([list, v, res.status, res.body?.error?.code]).toEqual([list, v, 400, 'invalid_query']);
        expect(res.body.error.message).toMatch(new RegExp(`^${name} must be an ISO-8601 date or time from 0001-01-01 to 9999-12-31 UTC`));
        expect(res.body.error.message).not.toMatch(/UTC without an offset/);
      }
      // the edges themselves are times
      expect((await call(`${list}?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59.999Z`)).status).toBe(200);
      expect((await call(`${list}?from=0001-01-01T01:00:00%2B01:00&to=9999-12-31T22:59:59-01:00`)).status).toBe(200);
    }
  });

  it('read a year before 100 as that year, not 19xx', async () => {
    for (const list of ['/v1/workspaces/w1/patterns', '/v1/workspaces/w1/insights']) {
      const res = await call(`${list}?from=0050-06-01&to=0099-12-31T12:00:00%2B02:00`);
      expect(res.status).toBe(200);
      expect(res.body.window).toEqual({ from: '0050-06-01T00:00:00.000Z', to: '0099-12-31T10:00:00.000Z' });
    }
  });

  it("refuse a session's started_at before year 100 (PGlite read 0050 back as 1950), and keep one from 100 on", async () => {
    expect((await send(`${url}/v1/workspaces/w1/head`, 'PUT', KEY, { files: fixtureFolder() })).status).toBe(200);
    expect((await send(`${url}/v1/workspaces/w1/releases`, 'POST', KEY)).status).toBe(201);
    for (const started_at of ['0050-01-01T00:00:00Z', '0099-12-31T23:59:59Z', '0100-01-01T00:30:00+01:00']) {
      const res = await send(`${url}/v1/workspaces/w1/sessions`, 'POST', KEY, { ...fixtureSession('payment-skipped'), external_id: `e-${started_at}`, started_at });
      expect([started_at, res.status, res.body.error?.code]).toEqual([started_at, 400, 'invalid_session']);
    }
    const sent = await send(`${url}/v1/workspaces/w1/sessions`, 'POST', KEY, { ...fixtureSession('payment-skipped'), external_id: 'e-100', started_at: '0100-01-01T00:00:00Z' });
    expect(sent.status).toBe(202);
    expect((await call(`/v1/workspaces/w1/sessions/${sent.body.id}`)).body.started_at).toBe('0100-01-01T00:00:00.000Z');
  });
});
