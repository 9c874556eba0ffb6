import type { INestApplication } from '@nestjs/common';
import { send, startApiOn, startSopHarness, type SopHarness } from '../../../services/api/src/sop-harness.test';

/** What this spec calls of app/api.ts. */
interface ProceduresApi {
  procedures(s: { project: string; key: string }): Promise<{
    releases: { number: number; procedures: { name: string }[] }[];
    live: { number: number; procedures: { rules: unknown[] }[] } | null;
    head: { files: unknown[] };
  }>;
  releaseSummaries(s: { project: string; key: string }): Promise<{ items: unknown[] }>;
}
// Loaded by jest, not seen by the specs' typecheck: app/api.ts is the browser's code (window,
// sessionStorage), which the specs' compile without the DOM library cannot check.
const { api } = jest.requireActual<{ api: ProceduresApi }>('../app/api');

const KEY = 'key-for-big';
const RELEASES = 50;

/** 20 procedures of 25 long steps each: a release whole is about 200 KB. */
const folder = Array.from({ length: 20 }, (_, p) => ({
  path: `procedures/proc-${p}.md`,
  text: `# Procedure ${p}\nGoal: The customer's request number ${p} is handled.\n\n## Steps\n${Array.from(
    { length: 25 },
    (_, s) => `${s + 1}. Step ${s} of procedure ${p}: ${'check the account, confirm with the customer and write it down carefully '.repeat(4)}`,
  ).join('\n')}\n`,
}));

let h: SopHarness;
let app: INestApplication;
let url: string;
const realFetch = globalThis.fetch;
/** Each request the web app's client made, with the bytes of its answer. */
let requests: { path: string; bytes: number }[] = [];

beforeAll(async () => {
  h = await startSopHarness({ big: KEY });
  ({ app, url } = await startApiOn(h.db, 'big', h.sop.queries, h.sop.review));
  const base = `${url}/v1/workspaces/big`;
  expect((await send(`${base}/head`, 'PUT', KEY, { files: folder })).status).toBe(200);
  for (let i = 0; i < RELEASES; i++) expect((await send(`${base}/releases`, 'POST', KEY)).status).toBe(201);
  // The app's calls are relative to its page: sent here to the api, their answers measured.
  globalThis.fetch = (async (input: string, init?: RequestInit) => {
    if (!input.startsWith('/')) return realFetch(input, init);
    const res = await realFetch(`${url}${input}`, init);
    const text = await res.text();
    requests.push({ path: input, bytes: Buffer.byteLength(text) });
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  }) as typeof fetch;
}, 180_000);
afterAll(async () => {
  globalThis.fetch = realFetch;
  await app?.close();
  await h?.close();
});
beforeEach(() => {
  requests = [];
});

const session = { project: 'big', key: KEY };

describe('what the Procedures and Insights pages fetch with many large releases', () => {
  it('reads under 1 MB for 50 releases of 20 procedures (their whole list is many MB), and still has the live one whole', async () => {
    const whole = await send(`${url}/v1/workspaces/big/releases`, 'GET', KEY);
    const wholeBytes = Buffer.byteLength(JSON.stringify(whole.body));
    expect(wholeBytes).toBeGreaterThan(5_000_000);

    const page = await api.procedures(session);
    const fetched = requests.reduce((n, r) => n + r.bytes, 0);
    expect(fetched).toBeLessThan(1_000_000);
    expect(page.releases.map((r) => r.number)).toEqual(Array.from({ length: RELEASES }, (_, i) => RELEASES - i));
    expect(page.releases[1].procedures.map((p) => p.name)).toContain('Procedure 7');
    expect(page.live?.number).toBe(RELEASES);
    expect(page.live?.procedures[0].rules).toHaveLength(25);
    expect(page.head.files).toHaveLength(20);
  });

  it("reads the releases Insights' comparison offers in under 1 MB, every one of them", async () => {
    const list = await api.releaseSummaries(session);
    expect(list.items).toHaveLength(RELEASES);
    expect(requests.reduce((n, r) => n + r.bytes, 0)).toBeLessThan(1_000_000);
  });
});
