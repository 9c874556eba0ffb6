import { checkSession, noModelDecider, type Decider } from '@neatroots/sop';
import type { Db } from '@neatroots/ports';
import type { Sop } from '@neatroots/review';
import { fixtureFolder, fixtureSession } from '../../../services/api/src/sop-harness.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops recheck` against a running server: a session checked while no model was configured
 * (the rules a model decides `not_checked`) is checked again as stored once there is one, its
 * results replaced; an unknown session and one whose transcript was let go are the server's
 * refusals (exit 1, its words); wrong options exit 2 before anything is sent.
 */
const KEY = 'luigis-key';
let db: Db;
let sop: Sop;
let server: SopopsServer;
let url: string;

/** A model that answers every question: done, not broken, handled, reached. */
const answering: Decider = {
  model: 'test-model',
  promptVersion: 'test',
  decide: async (q) => ({ decided: true, answer: !['never', 'warning'].includes(q.kind), probability: ['never', 'warning'].includes(q.kind) ? 0.02 : 0.98, sure: true, evidence: [], reason: 'The test model says so.' }),
};
/** The decider the server's checks use now: none until the test configures one. */
let decider: Decider = noModelDecider('no model is configured');
let checks = 0;

beforeAll(async () => {
  server = await startSopopsServer('luigis', KEY, {
    sop: {
      checkSession: ({ lock, releaseId, session }) => {
        checks++;
        return checkSession(lock, session, { decider, releaseId });
      },
    },
    prepare: async (s) => {
      await s.queries.pushHead('luigis', fixtureFolder());
      await s.queries.publish('luigis');
    },
  });
  ({ db, sop, url } = server);
}, 60_000);
afterAll(() => server.close());

const sopops = (args: string[]) => runSopops(args, { NEATROOTS_API_KEY: KEY, NEATROOTS_URL: url });
const notChecked = (s: { checks: { rules: { status: string }[] }[] }) => s.checks.flatMap((c) => c.rules).filter((r) => r.status === 'not_checked');

/** The session once its check `n` (counted from the server's start) is done and stored. */
async function checkedAfter(id: string, n: number) {
  for (;;) {
    const s = await sop.queries.getSession('luigis', id);
    if (checks >= n && s.status === 'checked') return s;
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function sent(externalId: string) {
  const n = checks + 1;
  const r = await sop.queries.receiveSession('luigis', { ...fixtureSession('phone-followed-pickup'), external_id: externalId });
  return { id: r.id, first: await checkedAfter(r.id, n) };
}

describe('sopops recheck', () => {
  it('checks a stored session again, as the server is set up now, and says it is queued', async () => {
    const { id, first } = await sent('call-recheck');
    expect(notChecked(first).length).toBeGreaterThan(0);

    decider = answering;
    const before = checks;
    const r = await sopops(['recheck', '--workspace', 'luigis', '--session', id]);
    expect(r).toEqual({ code: 0, out: [`${id} (call-recheck) in luigis: queued, to be checked again; its results are replaced when the check is done`], err: [] });
    const again = await checkedAfter(id, before + 1);
    expect(notChecked(again)).toEqual([]);
    expect(again).toMatchObject({ external_id: 'call-recheck', error: null, received_at: first.received_at });
  }, 60_000);

  it('an unknown session or one whose transcript was let go: the server\'s words, exit 1', async () => {
    const unknown = await sopops(['recheck', '--workspace', 'luigis', '--session', 'ses_nope']);
    expect(unknown).toEqual({ code: 1, out: [], err: [`sopops recheck: POST ${url}/v1/workspaces/luigis/sessions/ses_nope/recheck: 404 not_found: no session ses_nope in workspace luigis`] });

    const { id } = await sent('call-expired');
    await db.query(`UPDATE sop_sessions SET transcript_expired_at = now(), body = body || '{"turns":[],"tool_calls":[]}'::jsonb WHERE id = $1`, [id]);
    const expired = await sopops(['recheck', '--workspace', 'luigis', '--session', id]);
    expect(expired).toEqual({
      code: 1,
      out: [],
      err: [`sopops recheck: POST ${url}/v1/workspaces/luigis/sessions/${id}/recheck: 409 transcript_expired: session ${id}'s transcript was let go (NEATROOTS_TRANSCRIPT_RETENTION_DAYS): there is nothing to check; send the session again to check it`],
    });
  }, 60_000);

  it('wrong options exit 2 with the usage, before anything is sent', async () => {
    const before = checks;
    const usage = 'Usage: sopops recheck --session ID [--workspace WS] [--url URL] [--key KEY]';
    for (const [args, said] of [
      [['--workspace', 'luigis'], 'which session: --session ID'],
      [['--workspace', 'luigis', 'ses_1'], 'recheck takes no arguments, got ses_1 (the session: --session ID)'],
      [['--workspace', 'luigis', '--session', 'ses_1', '--session', 'ses_2'], 'one --session at a time, got 2'],
      [['--workspace', 'luigis', '--session'], '--session needs a value'],
      [['--workspace', 'luigis', '--session', ''], '--session needs a value, got an empty one'],
      [['--workspace', 'luigis', '--session', 'ses_1', '--force'], 'unknown option --force'],
      [['--session', 'ses_1'], 'which workspace: --workspace WS or NEATROOTS_WORKSPACE'],
    ] as const) {
      expect(await sopops(['recheck', ...args])).toEqual({ code: 2, out: [], err: [`sopops recheck: ${said}\n${usage}`] });
    }
    expect(checks).toBe(before);
    // and it is listed with the other commands
    const help = await sopops(['--help']);
    expect(help.out.join('\n')).toMatch(/^ {2}recheck +check a stored session again/m);
  });
});
