import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ProcedureCheck } from '@neatroots/sop';
import { readFolder, runExternalId } from '@neatroots/sop';
import { sessionId, type SessionView, type SopQueries } from '@neatroots/store';
import { DEMO_DIR, DEMO_PROJECT } from './embedded';

/**
 * The demo's SOP side: the demo project is also a workspace. Its procedures folder (the demo
 * folder's procedures/ and agents/) is pushed and published at start, a few sample sessions
 * are sent in, and the fleet's runs become sessions of its support agent when they end; then
 * their results are printed. A restart publishes nothing new while head is unchanged, and
 * re-sent samples are unchanged (sessions are idempotent by content).
 */
export const DEMO_SESSIONS = path.join(DEMO_DIR, 'sessions.json');

export interface DemoWorkspace {
  /** The live release's number. */
  release: number;
  /** Whether this start published it (false: head was unchanged since). */
  published: boolean;
  procedures: string[];
  /** The sample sessions' ids, in file order. */
  samples: string[];
}

export async function loadDemoWorkspace(sop: SopQueries, opts: { workspace?: string; dir?: string; sessions?: string } = {}): Promise<DemoWorkspace> {
  const ws = opts.workspace ?? DEMO_PROJECT;
  const files = readFolder(opts.dir ?? DEMO_DIR);
  await sop.pushHead(ws, [...files].map(([p, text]) => ({ path: p, text })));
  const head = await sop.head(ws);
  const publish = !head.live_release || head.changed.length > 0;
  const release = publish ? await sop.publish(ws) : await sop.release(ws, 'live');
  const sessions = JSON.parse(fs.readFileSync(opts.sessions ?? DEMO_SESSIONS, 'utf8')) as unknown[];
  const samples: string[] = [];
  for (const s of sessions) samples.push((await sop.receiveSession(ws, s)).id);
  return { release: release.number, published: publish, procedures: release.procedures.map((p) => p.procedure_id), samples };
}

export interface SummaryOptions {
  workspace?: string;
  demo: DemoWorkspace;
  /** The ids of the fleet's runs this start sent (each becomes the session run:<id> when it ends). */
  runIds: readonly string[];
  /** Whether a decision model or a local LLM is configured. */
  modelConfigured: boolean;
  timeoutMs?: number;
}

/** The sessions' results, as printed after the live checks: one line a session, then what was not checked. */
export async function demoSopSummary(sop: SopQueries, opts: SummaryOptions): Promise<string[]> {
  const ws = opts.workspace ?? DEMO_PROJECT;
  const end = Date.now() + (opts.timeoutMs ?? 10_000);
  let samples: SessionView[] = [];
  let runs: SessionView[] = [];
  for (;;) {
    samples = await Promise.all(opts.demo.samples.map((id) => sop.getSession(ws, id)));
    // By id (a session's id follows from its external id): a run not yet a session is simply not there.
    const found = await Promise.all(opts.runIds.map((id) => sop.getSession(ws, sessionId(ws, runExternalId(id))).catch(notFound)));
    runs = found.filter((s): s is SessionView => s !== null);
    const done = [...samples, ...runs].every((s) => s.status !== 'queued') && runs.length >= opts.runIds.length;
    if (done || Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  runs.sort((a, b) => (a.external_id ?? '').localeCompare(b.external_id ?? ''));
  const lines = [
    `SOP checks of workspace "${ws}": release ${opts.demo.release} ${opts.demo.published ? 'published now' : 'stays live (head unchanged)'}, procedures ${opts.demo.procedures.join(', ')}`,
    `  sample sessions (POST /v1/workspaces/${ws}/sessions):`,
    ...samples.map(sessionLine),
    `  the fleet's runs, each a session of its agent when it ended:`,
    ...runs.map(sessionLine),
  ];
  if (runs.length < opts.runIds.length) {
    const seen = new Set(runs.map((s) => s.external_id));
    const missing = opts.runIds.map(runExternalId).filter((e) => !seen.has(e));
    lines.push(`    (${missing.length} more not sessions yet: ${missing.join(', ')})`);
  }
  const notChecked = notCheckedRules([...samples, ...runs]);
  if (notChecked) {
    if (opts.modelConfigured) lines.push(`  Not checked: ${notChecked} (GET a session for each rule's reason).`);
    else {
      lines.push(`  Not checked, because no model is configured: ${notChecked}; and whether each goal was reached.`);
      lines.push('  Only tool steps are decided, from the tool calls. To check the rest, set NEATROOTS_LLM_URL (a local OpenAI-compatible server) or NEATROOTS_DECISION_MODEL_URL and start again.');
    }
  }
  return lines;
}

/** A session that is not there (yet) is null; any other failure is thrown. */
function notFound(err: unknown): null {
  if ((err as { status?: number }).status === 404) return null;
  throw err;
}

function sessionLine(s: SessionView): string {
  const name = (s.external_id ?? s.id).padEnd(32);
  if (s.status === 'queued') return `    ${name} still queued`;
  if (s.status === 'failed') return `    ${name} failed: ${s.error ?? 'no reason given'}`;
  // The checker's own words: a session where the agent never spoke is not measured, whatever its steps.
  const silent = s.checks.some((c) => c.goal_reason?.includes('The agent never spoke')) ? ' (not measured: the agent never spoke)' : '';
  return `    ${name} ${(s.result ?? '-').padEnd(15)} ${s.checks.map(checkText).join('; ')}${silent}`;
}

/**
 * A check as "refund-order: 1 done, 2 skipped", "refund-order: not started (1 not_reached, …)"
 * when the session ended before it started, or "customer-care: not checked" when no rule was.
 */
function checkText(c: ProcedureCheck): string {
  if (c.applicable === null && !c.rules.length) return `${c.procedure_id}: not routed`;
  if (c.applicable === false) return `${c.procedure_id}: does not apply`;
  if (c.rules.every((r) => r.status === 'not_checked')) return `${c.procedure_id}: not checked`;
  const parts = c.rules.filter((r) => r.kind === 'step').map((r) => `${r.index} ${r.status}`);
  for (const r of c.rules) if (r.kind !== 'step' && r.finding) parts.push(`${r.kind} ${r.index} ${r.status}`);
  // excluded_reason: the session ended before the procedure started; left out of the result
  if (c.excluded_reason) return `${c.procedure_id}: not started (${parts.join(', ')})`;
  return `${c.procedure_id}: ${parts.join(', ')}`;
}

/** "refund-order step 2; customer-care step 1, step 2, never 1, warning 1" over all sessions, or '' when every rule was checked. */
function notCheckedRules(sessions: SessionView[]): string {
  const byProcedure = new Map<string, Set<string>>();
  for (const s of sessions) {
    for (const c of s.checks) {
      for (const r of c.rules) {
        if (r.status !== 'not_checked') continue;
        const set = byProcedure.get(c.procedure_id) ?? new Set<string>();
        set.add(`${r.kind}:${r.index}`);
        byProcedure.set(c.procedure_id, set);
      }
    }
  }
  const order = ['step', 'never', 'warning'];
  return [...byProcedure]
    .map(([p, set]) => {
      const rules = [...set].map((k) => k.split(':')).sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]) || Number(a[1]) - Number(b[1]));
      return `${p} ${rules.map(([kind, i]) => `${kind} ${i}`).join(', ')}`;
    })
    .join('; ');
}
