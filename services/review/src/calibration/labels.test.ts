import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { checkSession, readFolder, recordedDecider, type Recorded } from '@neatroots/sop';
import type { Sop } from '../sop/service';
import type { CheckSession } from '../sop/sessions';

/**
 * The labels every calibration test fits from: five fixture sessions of luigis broke the never
 * rule with probabilities 0.91 to 0.99, and a reviewer judged the three least sure of them wrong.
 * Named *.test.ts: a helper, neither run by jest (it runs *.spec.ts) nor built.
 */
const FIXTURES = path.resolve(__dirname, '../../../../libs/sop/fixtures');
const SESSION = path.join(FIXTURES, 'sessions', 'phone-never-violated');
const fixture = JSON.parse(readFileSync(path.join(SESSION, 'session.json'), 'utf8'));
const recorded: Recorded = JSON.parse(readFileSync(path.join(SESSION, 'decisions.json'), 'utf8'));
const P = [0.91, 0.92, 0.93, 0.98, 0.99];

/** The recorded decisions, with the never question's probability taken from the session's external id (`...@0.93`). */
export const calibrationChecker: CheckSession = ({ lock, releaseId, session, onDecision }) => {
  const p = Number((session.external_id ?? '').split('@')[1]);
  const base = recordedDecider(recorded);
  return checkSession(lock, session, { releaseId, onDecision, decider: { ...base, decide: async (q) => ((a) => (a.decided && q.kind === 'never' ? { ...a, probability: p } : a))(await base.decide(q)) } });
};

/** Publishes luigis, sends the five sessions, waits until each is checked and in a pattern, then judges them. */
export async function labelForCalibration(sop: Sop, db: Db): Promise<void> {
  await sop.queries.pushHead('luigis', [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([f, text]) => ({ path: f, text })));
  await sop.queries.publish('luigis');
  const ids: string[] = [];
  for (const [i, p] of P.entries()) ids.push((await sop.queries.receiveSession('luigis', { ...fixture, external_id: `call-8#${i}@${p}` })).id);
  for (let i = 0; i < 500; i++) {
    const waiting = await db.query<{ n: number }>(`SELECT (SELECT count(*) FROM sop_sessions WHERE status = 'queued') + (SELECT count(*) FROM sop_findings WHERE pattern_id IS NULL) AS n`);
    if (Number(waiting.rows[0].n) === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const findings = (await Promise.all(ids.map((id) => sop.queries.getSession('luigis', id)))).map((v) => v.checks.flatMap((c) => c.rules).find((r) => r.finding)!);
  await sop.review.giveVerdict('luigis', findings[0].pattern_id!, { verdict: 'real' });
  for (const f of findings.slice(0, 3)) await sop.review.overrideFinding('luigis', f.finding_id!, { correct: false });
}
