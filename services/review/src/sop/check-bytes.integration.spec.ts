import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import type { Session, SessionBody } from '@neatroots/sop';
import { SOP_CHECK_BYTES, SOP_CHECK_CONCURRENCY, SopSessions, type CheckSession } from './sessions';
import { SopWorkspaces } from './workspaces';
import { fixtureSession, luigisFiles, useMigratedDb } from '../sop-fixtures.test';

/**
 * A burst of long sessions on the embedded deployment (PGlite, inline jobs): the checks hold at
 * most SOP_CHECK_BYTES of transcript at once, while short sessions keep their sixteen at once,
 * and every session is checked exactly once.
 */

/** The audit's long session: 1,200 turns and 1,000 tool calls with 3 KB outputs (about 3.2 MB). */
function longSession(i: number): Record<string, unknown> {
  const base = fixtureSession('payment-skipped');
  const pad = (seed: string) => `output line ${seed} lorem ipsum dolor sit amet; `.repeat(80).slice(0, 3000);
  return {
    ...base,
    external_id: `long-${i}`,
    turns: Array.from({ length: 1200 }, (_, t) => (t % 2 === 0 ? { role: 'user', text: `Caller ${i} asks thing ${t}.` } : { role: 'agent', text: `Doing action ${t} for caller ${i}.` })),
    tool_calls: Array.from({ length: 1000 }, (_, c) => ({ turn: 1 + 2 * Math.floor((c * 599) / 1000), tool: 'lookup', input: { c }, output: { text: pad(`${i}-${c}`) }, error: null })),
  };
}

const shortSession = (i: number) => ({ ...fixtureSession('payment-skipped'), external_id: `short-${i}` });

let db: Db;
let jobs: InlineJobs;
useMigratedDb((d) => (db = d), 'sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects');
beforeEach(() => {
  jobs = new InlineJobs();
});
afterEach(() => jobs.close());

/**
 * A checker that holds each check until every queued job is done, inside a check or waiting for
 * room (so the most held at once is reached whatever the machine's speed), recording the
 * transcript bytes inside checks at once, the most of them, and each session's checks.
 */
function holdingChecker(expected: number, sessions: () => SopSessions) {
  const seen = { inside: 0, done: 0, bytes: 0, peakBytes: 0, peakInside: 0, checks: new Map<string, number>() };
  const checker: CheckSession = async ({ session }: { session: Session }) => {
    const bytes = JSON.stringify([session.turns, session.tool_calls]).length;
    seen.inside++;
    seen.bytes += bytes;
    seen.peakInside = Math.max(seen.peakInside, seen.inside);
    seen.peakBytes = Math.max(seen.peakBytes, seen.bytes);
    seen.checks.set(session.external_id!, (seen.checks.get(session.external_id!) ?? 0) + 1);
    while (seen.done + seen.inside + sessions().checkBytes().waiting < expected && seen.inside < SOP_CHECK_CONCURRENCY) await new Promise((r) => setImmediate(r));
    seen.inside--;
    seen.done++;
    seen.bytes -= bytes;
    return { id: null, external_id: session.external_id, agent: session.agent, release_id: null, status: 'checked', result: 'followed', checks: [] } as SessionBody;
  };
  return { seen, checker };
}

/** luigis published, its sessions checked by `checker` (with SopSessions.start's options). */
async function started(checker: CheckSession, opts: { bytes?: number } = {}): Promise<SopSessions> {
  const workspaces = new SopWorkspaces(db);
  await workspaces.push('luigis', luigisFiles());
  await workspaces.publish('luigis');
  const sessions = new SopSessions(db, workspaces, jobs, checker);
  await sessions.start(opts);
  return sessions;
}

async function allChecked(sessions: SopSessions, ids: string[]): Promise<string[]> {
  for (;;) {
    const statuses = await Promise.all(ids.map(async (id) => (await sessions.get('luigis', id)).status));
    if (statuses.every((s) => s !== 'queued')) return statuses;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('checking a burst of sessions (embedded)', () => {
  it('holds at most SOP_CHECK_BYTES of transcript in checks at once when long sessions arrive together, and checks each once', async () => {
    const n = 12;
    const ref: { sessions?: SopSessions } = {};
    const { seen, checker } = holdingChecker(n, () => ref.sessions!);
    const sessions = (ref.sessions = await started(checker));
    const bodies = Array.from({ length: n }, (_, i) => longSession(i));
    const size = JSON.stringify([bodies[0].turns, bodies[0].tool_calls]).length;
    expect(size).toBeGreaterThan(3_000_000);
    const sent = await Promise.all(bodies.map((b) => sessions.receive('luigis', b)));
    expect(sent.map((s) => s.status)).toEqual(Array(n).fill('queued'));

    expect(await allChecked(sessions, sent.map((s) => s.id))).toEqual(Array(n).fill('checked'));
    // Each checked exactly once.
    expect([...seen.checks.entries()].sort()).toEqual(bodies.map((b) => [b.external_id, 1]).sort());
    // Several at once, but never more than the bound (sixteen of them would be about 51 MB).
    expect(seen.peakBytes).toBeLessThanOrEqual(SOP_CHECK_BYTES);
    expect(seen.peakInside).toBeGreaterThanOrEqual(2);
    expect(sessions.checkBytes()).toMatchObject({ held: 0, waiting: 0, limit: SOP_CHECK_BYTES });
    expect(sessions.checkBytes().peak).toBeLessThanOrEqual(SOP_CHECK_BYTES);
  }, 120_000);

  it('still checks sixteen short sessions at once', async () => {
    const n = SOP_CHECK_CONCURRENCY;
    const ref: { sessions?: SopSessions } = {};
    const { seen, checker } = holdingChecker(n, () => ref.sessions!);
    const sessions = (ref.sessions = await started(checker));
    const sent = await Promise.all(Array.from({ length: n }, (_, i) => sessions.receive('luigis', shortSession(i))));
    expect(await allChecked(sessions, sent.map((s) => s.id))).toEqual(Array(n).fill('checked'));
    expect(seen.peakInside).toBe(n);
    expect(seen.checks.size).toBe(n);
  }, 120_000);

  it('checks sessions longer than a smaller bound one at a time, each of them', async () => {
    const ref: { sessions?: SopSessions } = {};
    const small = holdingChecker(6, () => ref.sessions!);
    const sessions = (ref.sessions = await started(small.checker, { bytes: 2 * 1024 * 1024 }));
    const long = await Promise.all(Array.from({ length: 6 }, (_, i) => sessions.receive('luigis', longSession(100 + i))));
    expect(await allChecked(sessions, long.map((s) => s.id))).toEqual(Array(6).fill('checked'));
    expect(small.seen.peakInside).toBe(1);
    expect(small.seen.checks.size).toBe(6);
  }, 120_000);
});
