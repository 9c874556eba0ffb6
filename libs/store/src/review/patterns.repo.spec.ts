import type { Db } from '@neatroots/ports';
import { openTestDb } from '../test-db.test';
import { SopSessionsRepo, sopFindingId, type CheckOutcome, type SessionInput } from '../sop/sessions.repo';
import { LineageRepo } from '../sop/lineage.repo';
import { ClustersRepo } from './clusters.repo';
import { PatternsRepo } from './patterns.repo';
import { ReviewReadRepo } from './review-read.repo';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_overrides, sop_verdicts, sop_patterns, sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects CASCADE'));

const repo = new PatternsRepo();
const session = (external_id: string, started_at: string): SessionInput => ({ external_id, agent: 'a', release_id: null, started_at, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });

async function checked(external_id: string, started_at: string, rules: string[]): Promise<{ id: string; findings: string[] }> {
  const sessions = new SopSessionsRepo(db);
  const r = await sessions.receive('w1', session(external_id, started_at));
  const findings = rules.map((rule) => ({ id: sopFindingId(r.id, 'p', rule), procedure_id: 'p', rule_id: rule, kind: 'never' as const, index: 1, text: `rule ${rule}`, status: 'violated' as const, evidence: [{ turn: 0, quote: 'hi', source: 'transcript' }], reason: null }));
  const outcome: CheckOutcome = { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'p', result: 'deviated', checked_result: 'deviated', body: {} }], findings };
  await sessions.saveOutcome(r.id, r.content_hash, outcome);
  return { id: r.id, findings: findings.map((f) => f.id) };
}

const pattern = (id: string, lineage: string) => ({ id, workspace: 'w1', procedure_id: 'p', procedure_name: 'P', lineage_id: lineage, name: `n ${lineage}`, rule_id: lineage, rule_kind: 'never' as const, rule_index: 1, rule_text: `rule ${lineage}`, rule_ran_at: '2026-11-01T00:00:00.000Z' });

describe('PatternsRepo', () => {
  it('keeps one rule pattern per (workspace, procedure, lineage id)', async () => {
    await checked('s1', '2026-11-01T00:00:00Z', ['r1']);
    expect(await repo.insertRulePattern(db, pattern('pat_a', 'r1'))).toBe(true);
    expect(await repo.insertRulePattern(db, pattern('pat_a', 'r1'))).toBe(false);
    expect(await repo.insertRulePattern(db, pattern('pat_b', 'r1'))).toBe(false);
    expect((await repo.rulePatterns(db, 'w1', [{ procedure_id: 'p', lineage_id: 'r1' }, { procedure_id: 'p', lineage_id: 'r9' }])).map((p) => p.id)).toEqual(['pat_a']);
    expect((await repo.pattern(db, 'w1', 'pat_a'))?.named_by).toBe('rule_text');
    expect(await repo.pattern(db, 'w2', 'pat_a')).toBeNull();
  });

  it('lists unassigned findings until assigned, and a re-check stores them unassigned again', async () => {
    const s = await checked('s1', '2026-11-01T00:00:00Z', ['r1', 'r2']);
    await repo.insertRulePattern(db, pattern('pat_a', 'r1'));
    expect((await repo.unassigned(db, 'w1', 10)).map((f) => f.id).sort()).toEqual([...s.findings].sort());
    expect(await repo.workspacesWithUnassigned(db)).toEqual(['w1']);
    await repo.setAssignment(db, [{ id: s.findings[0], pattern_id: 'pat_a', rule_pattern_id: 'pat_a', suppressed: true }]);
    expect((await repo.unassigned(db, 'w1', 10)).map((f) => f.id)).toEqual([s.findings[1]]);
    expect((await repo.finding(db, 'w1', s.findings[0]))).toMatchObject({ pattern_id: 'pat_a', suppressed: true, at: '2026-11-01T00:00:00.000Z' });
    // a check saved again (a job run twice) stores its findings afresh: the patterns job assigns them again
    await checked('s1', '2026-11-01T00:00:00Z', ['r1', 'r2']);
    expect((await repo.unassigned(db, 'w1', 10))).toHaveLength(2);
  });

  it('appends verdicts (newest first) and keeps an override by session and rule across a re-check', async () => {
    const s = await checked('s1', '2026-11-01T00:00:00Z', ['r1']);
    await repo.insertRulePattern(db, pattern('pat_a', 'r1'));
    await repo.addVerdict(db, 'w1', 'pat_a', { verdict: 'real', note: null, reviewer: null });
    await repo.addVerdict(db, 'w1', 'pat_a', { verdict: 'acceptable', note: 'ok', reviewer: 'ana' });
    expect((await repo.verdicts(db, ['pat_a'])).map((v) => v.verdict)).toEqual(['acceptable', 'real']);

    const key = { session_id: s.id, procedure_id: 'p', rule_id: 'r1' };
    await repo.saveOverride(db, 'w1', { ...key, correct: true, note: null, reviewer: null });
    await repo.saveOverride(db, 'w1', { ...key, correct: false, note: 'no', reviewer: 'bo' });
    // new content for the session: its findings are replaced, its override stays
    const sessions = new SopSessionsRepo(db);
    await sessions.receive('w1', { ...session('s1', '2026-11-02T00:00:00Z') });
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(0);
    expect(await repo.overrides(db, [key])).toEqual([expect.objectContaining({ ...key, correct: false, note: 'no', reviewer: 'bo' })]);
  });
});

describe('ReviewReadRepo', () => {
  it('counts findings per pattern in a window, suppressed ones apart, and new ones since the verdict', async () => {
    const a = await checked('s1', '2026-11-01T00:00:00Z', ['r1']);
    const b = await checked('s2', '2026-11-10T00:00:00Z', ['r1']);
    const c = await checked('s3', '2026-11-20T00:00:00Z', ['r1']);
    await repo.insertRulePattern(db, pattern('pat_a', 'r1'));
    await repo.setAssignment(db, [a, b, c].map((s, i) => ({ id: s.findings[0], pattern_id: 'pat_a', rule_pattern_id: 'pat_a', suppressed: i === 0 })));
    const read = new ReviewReadRepo(db);
    expect(await read.findingCounts('w1', null)).toEqual([
      { rule_pattern_id: 'pat_a', pattern_id: 'pat_a', findings: 2, suppressed: 1, new_findings: 2, first_seen: '2026-11-01T00:00:00.000Z', last_seen: '2026-11-20T00:00:00.000Z' },
    ]);
    expect(await read.findingCounts('w1', { from: '2026-11-05T00:00:00Z', to: '2026-11-15T00:00:00Z' })).toEqual([expect.objectContaining({ findings: 1, suppressed: 0 })]);
    expect(await read.findingCounts('w1', null, { lineage: 'r2' })).toEqual([]);
    expect(await read.findingCounts('w1', null, { procedure: 'q' })).toEqual([]);
    await repo.addVerdict(db, 'w1', 'pat_a', { verdict: 'real', note: null, reviewer: null });
    expect((await read.findingCounts('w1', null))[0].new_findings).toBe(0);

    const weeks = await read.findingsByWeek('w1', { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z' }, {});
    expect(weeks.map((w) => [w.week, w.suppressed, w.n]).sort()).toEqual([
      ['2026-10-26', true, 1],
      ['2026-11-09', false, 1],
      ['2026-11-16', false, 1],
    ]);
    // the partial days at a window's ends are counted from the findings, the whole days from sop_finding_days
    const edges = await read.findingsByWeek('w1', { from: '2026-11-01T00:00:00.001Z', to: '2026-11-20T00:00:00.001Z' }, {});
    expect(edges.map((w) => [w.week, w.suppressed, w.n]).sort()).toEqual([
      ['2026-11-09', false, 1],
      ['2026-11-16', false, 1],
    ]);
    // a re-check clearing the session's findings takes them out of the days too
    await db.query('DELETE FROM sop_findings WHERE session_id = $1', [b.id]);
    expect((await read.findingsByWeek('w1', { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z' }, {})).map((w) => w.week).sort()).toEqual(['2026-10-26', '2026-11-16']);
    expect((await read.examples([{ id: 'pat_a', kind: 'rule' }], 2)).map((e) => e.session_id)).toEqual([c.id, a.id]);
    // emptied by a cascade (as the specs do between tests): the day counts go too
    await db.exec('TRUNCATE projects CASCADE');
    expect(await read.findingsByWeek('w1', { from: '2026-10-01T00:00:00Z', to: '2026-12-01T00:00:00Z' }, {})).toEqual([]);
  });
});

describe('LineageRepo.merge', () => {
  it("never moves findings into a retired other: a rule split once and then made whole merges as a whole rule", async () => {
    const a = await checked('s1', '2026-11-01T00:00:00Z', ['r1']);
    const b = await checked('s2', '2026-11-02T00:00:00Z', ['r2']);
    await repo.insertRulePattern(db, pattern('pat_a', 'r1'));
    await repo.insertRulePattern(db, pattern('pat_b', 'r2'));
    await repo.setAssignment(db, [
      { id: a.findings[0], pattern_id: 'pat_a', rule_pattern_id: 'pat_a', suppressed: false },
      { id: b.findings[0], pattern_id: 'pat_b', rule_pattern_id: 'pat_b', suppressed: false },
    ]);
    // pat_a was split (an other), then made whole again: its other is retired.
    const clusters = new ClustersRepo();
    await clusters.insertChild(db, { id: 'pat_a_other', parent_id: 'pat_a', kind: 'other', name: 'Other', named_by: 'model', description: null });
    await clusters.retire(db, ['pat_a_other'], new Date().toISOString());

    await new LineageRepo().merge(db, 'pat_b', 'pat_a');
    const rows = await db.query<{ id: string; pattern_id: string; rule_pattern_id: string }>('SELECT id, pattern_id, rule_pattern_id FROM sop_findings ORDER BY id');
    expect(rows.rows.map((r) => [r.pattern_id, r.rule_pattern_id])).toEqual([
      ['pat_a', 'pat_a'],
      ['pat_a', 'pat_a'],
    ]);
  });
});
