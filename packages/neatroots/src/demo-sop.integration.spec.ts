import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { ProjectsRepo } from '@neatroots/store';
import { runDemoFleet } from './demo';
import { demoSopSummary, loadDemoWorkspace } from './demo-sop';
import { DEMO_PROJECT, startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * What `neatroots start` shows of SOP checks: the demo folder's procedures published as the
 * demo workspace's release, sample sessions covering each status and result checked with no
 * model (tool steps decided, the rest not checked, said plainly), the fleet's runs becoming
 * sessions of its support agent, and a restart publishing nothing new.
 */
const boot = (home: string) =>
  startEmbedded({
    config: testConfig(home),
    demo: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });

/** What the store holds of runs that did not become sessions: stored at all, ended, their workflow. */
async function whyNot(app: EmbeddedApp, runIds: readonly string[]): Promise<string> {
  const rows = await app.db.query<Record<string, unknown>>('SELECT run_id, workflow, end_status, ended_at, span_count FROM runs WHERE project = $1 AND run_id = ANY($2)', [DEMO_PROJECT, [...runIds]]);
  const live = await app.review.sop.release(DEMO_PROJECT, 'live').catch((e: Error) => e.message);
  return `runs stored: ${JSON.stringify(rows.rows)}\nlive release: ${JSON.stringify(live)}`;
}

describe('the demo workspace at start', () => {
  let home: string;
  let app: EmbeddedApp | undefined;

  beforeAll(() => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-demo-sop-'));
  });
  afterAll(async () => {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('publishes the demo procedures, checks the samples and the fleet runs with no model, and says what was not checked', async () => {
    app = await boot(home);
    const ws = await loadDemoWorkspace(app.review.sop);
    expect(ws).toMatchObject({ release: 1, published: true, procedures: ['customer-care', 'refund-order'] });
    // The demo's agents send with a key of their own that may only send spans; the printed key does everything.
    expect(await new ProjectsRepo(app.db).resolveApiKey(app.demoAgentKey!)).toEqual({ project: DEMO_PROJECT, scope: 'ingest' });
    expect(await new ProjectsRepo(app.db).resolveApiKey(app.demoKey!)).toEqual({ project: DEMO_PROJECT, scope: 'api' });
    const fleet = await runDemoFleet({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: app.demoAgentKey!, onEvent: () => undefined, stepMs: 5 });
    // A loaded machine (CI) takes longer than start's 10 s to check every run: the test waits up to a minute.
    const lines = await demoSopSummary(app.review.sop, { demo: ws, runIds: fleet.runIds, modelConfigured: false, timeoutMs: 60_000 });
    const row = (name: string) => lines.find((l) => l.trimStart().startsWith(name))?.replace(/\s+/g, ' ').trim();

    expect(lines[0]).toBe('SOP checks of workspace "demo": release 1 published now, procedures customer-care, refund-order');
    // each step status and each result, decided from the tool calls alone
    expect(row('sample-refund-followed')).toBe('sample-refund-followed followed refund-order: 1 done, 2 done; customer-care: not checked');
    expect(row('sample-refund-out-of-order')).toBe('sample-refund-out-of-order partial refund-order: 1 out_of_order, 2 done; customer-care: not checked');
    expect(row('sample-refund-skipped')).toBe('sample-refund-skipped deviated refund-order: 1 skipped, 2 done; customer-care: not checked');
    // the customer changed their mind before the lookup: refund-order never started, so it is left out
    // (step 2 is undecided only on its when:, and its tool was never called)
    expect(row('sample-refund-not-reached')).toBe(
      'sample-refund-not-reached not_measurable refund-order: not started (1 not_reached, 2 not_checked); customer-care: not checked',
    );
    // no tool calls: even the tool steps need a model, so nothing is measured
    expect(row('sample-no-tool-calls')).toBe('sample-no-tool-calls not_measurable refund-order: not checked; customer-care: not checked');

    // every run of the fleet's support agent became a session of this start, and was checked
    const runRows = lines.filter((l) => l.trimStart().startsWith('run:'));
    if (runRows.length !== fleet.runs) throw new Error(`${runRows.length} of ${fleet.runs} runs became sessions:\n${lines.join('\n')}\n${await whyNot(app, fleet.runIds)}`);
    expect(runRows).toHaveLength(fleet.runs);
    expect(runRows.find((l) => l.includes('run:run-refund-ok-'))).toMatch(/ followed +refund-order: 1 done, 2 done;/);
    // halted before it said anything: the skipped lookup is shown, but nothing is measured
    expect(runRows.find((l) => l.includes('run:run-refund-bad-'))).toMatch(/ not_measurable +refund-order: 1 skipped, 2 done; .*\(not measured: the agent never spoke\)$/);

    const notChecked = lines.filter((l) => l.includes('Not checked') || l.includes('NEATROOTS_LLM_URL'));
    expect(notChecked).toEqual([
      '  Not checked, because no model is configured: customer-care step 1, step 2, never 1, warning 1; refund-order step 1, step 2; and whether each goal was reached.',
      '  Only tool steps are decided, from the tool calls. To check the rest, set NEATROOTS_LLM_URL (a local OpenAI-compatible server) or NEATROOTS_DECISION_MODEL_URL and start again.',
    ]);
  }, 120_000);

  it('a restart publishes nothing new while head is unchanged, and the samples are unchanged', async () => {
    const keys = [app!.demoKey, app!.demoAgentKey];
    await app!.close();
    app = await boot(home);
    expect([app.demoKey, app.demoAgentKey]).toEqual(keys);
    const ws = await loadDemoWorkspace(app.review.sop);
    expect(ws).toMatchObject({ release: 1, published: false });
    expect((await app.review.sop.releases(DEMO_PROJECT)).items.map((r) => r.number)).toEqual([1]);
    const again = await app.review.sop.receiveSession(DEMO_PROJECT, JSON.parse(fs.readFileSync(path.join(__dirname, '../demo/sessions.json'), 'utf8'))[0]);
    expect(again).toMatchObject({ id: ws.samples[0], status: 'unchanged' });
    const lines = await demoSopSummary(app.review.sop, { demo: ws, runIds: [], modelConfigured: false });
    expect(lines[0]).toBe('SOP checks of workspace "demo": release 1 stays live (head unchanged), procedures customer-care, refund-order');
  }, 120_000);
});

describe('neatroots start (the built CLI)', () => {
  it('prints the SOP results after the live checks, then serves', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-start-sop-'));
    const ports = { NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0', NEATROOTS_ADMIN_PORT: '0' };
    const proc = spawn(process.execPath, [path.resolve(__dirname, '../bin/neatroots.js'), 'start'], {
      env: { PATH: process.env.PATH, NEATROOTS_HOME: home, ...ports },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr!.on('data', () => undefined);
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no "Serving" in 90 s:\n${out}`)), 90_000);
        proc.stdout!.on('data', () => out.includes('Serving; Ctrl-C to stop.') && (clearTimeout(t), resolve()));
        proc.once('exit', (code) => reject(new Error(`start exited ${code}:\n${out}`)));
      });
      const findings = out.indexOf('Findings stored');
      const sop = out.indexOf('SOP checks of workspace "demo": release 1 published now');
      expect(findings).toBeGreaterThan(0);
      expect(sop).toBeGreaterThan(findings);
      expect(out).toMatch(/sample-refund-skipped +deviated +refund-order: 1 skipped, 2 done/);
      expect(out).toMatch(/run:run-refund-ok-\w+ +followed +refund-order: 1 done, 2 done/);
      expect(out).toContain('Not checked, because no model is configured:');
      expect(out).toContain('/v1/workspaces/demo/sessions');
    } finally {
      proc.kill('SIGINT');
      await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 120_000);
});
