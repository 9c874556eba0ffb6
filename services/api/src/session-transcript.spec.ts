import type { INestApplication } from '@nestjs/common';
import { sessionAsStored } from '@neatroots/sop';
import { deployments, fixtureSession, send, startPublishedApi, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * GET /v1/workspaces/{ws}/sessions/{id}/transcript: the session as it was received (its turns
 * numbered from 0, as a rule's evidence counts them, and its tool calls), so the app can show
 * the conversation a check judged; 404 when there is no such session. The session's own GET
 * stays the body `sopops check` prints, without the turns. The same answers in-process and over
 * gRPC (neatroots.v1.Sop GetSessionTranscript).
 */
const KEY = 'key-for-transcripts';
const OTHER = 'key-for-someone-else';

let h: SopHarness;

beforeAll(async () => {
  h = await startSopHarness({ luigis: KEY, other: OTHER });
}, 60_000);
afterAll(() => h.close());

describe.each(deployments(() => h))('GET sessions/{id}/transcript (%s)', (name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await startPublishedApi(h.db, sopOf(), reviewOf(), KEY));
  });
  afterAll(() => app.close());

  it('answers the turns in order, numbered, and the tool calls as sent; the evidence of a check points into them', async () => {
    const session = { ...fixtureSession('payment-skipped'), external_id: `transcript-${name}` };
    const sent = await send(`${base}/sessions`, 'POST', KEY, session);
    expect(sent.status).toBe(202);

    const got = await send(`${base}/sessions/${sent.body.id}/transcript`, 'GET', KEY);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      id: sent.body.id,
      external_id: session.external_id,
      turns: session.turns.map((t: { role: string; text: string }, index: number) => ({ index, role: t.role, text: t.text })),
      tool_calls: session.tool_calls,
      transcript_expired_at: null,
    });

    // The check's GET is unchanged (no turns), and each evidence turn is a turn of the transcript.
    const checked = await send(`${base}/sessions/${sent.body.id}`, 'GET', KEY);
    expect(checked.body.status).toBe('checked');
    expect(checked.body).not.toHaveProperty('turns');
    // Field for field, in order, what `sopops check` prints for a session.
    const offline = sessionAsStored({ id: null, external_id: null, agent: null, release_id: null, status: 'checked', result: null, checks: [] }, session);
    expect(Object.keys(checked.body)).toEqual(Object.keys(offline));
    expect(checked.body.started_at).toBe(new Date(session.started_at).toISOString());
    const evidence = checked.body.checks.flatMap((c: { rules: { evidence?: { turn: number; quote: string }[] }[] }) => c.rules.flatMap((r) => r.evidence ?? []));
    expect(evidence.length).toBeGreaterThan(0);
    for (const e of evidence) expect(got.body.turns[e.turn]).toBeDefined();
  });

  it('404 for a session that is not there, 403 with another workspace\'s key, 400 with a query', async () => {
    const missing = await send(`${base}/sessions/nope/transcript`, 'GET', KEY);
    expect(missing).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'no session nope in workspace luigis' } } });
    expect((await send(`${base}/sessions/nope/transcript`, 'GET', OTHER)).status).toBe(403);
    expect((await send(`${base}/sessions/nope/transcript?x=1`, 'GET', KEY)).status).toBe(400);
  });
});
