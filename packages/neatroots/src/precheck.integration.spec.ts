import { once } from 'node:events';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { registerProject } from '@neatroots/checks';
import { v1 } from '@neatroots/proto';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient, RunHaltedError } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * Halt before the harm, end to end on the embedded default: an agent on the SDK asks before
 * each call a halting rule names; the rule engine answers from the run's window with the
 * rules in effect; a refund without an order lookup is never executed, one after a lookup is.
 */
const KEY = 'precheck-key';
const RULE = `id: refund-without-lookup
kind: rule
title: Refund issued without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
guidance: Look the order up before refunding it.
action: halt
`;

/**
 * The pre-call check's wait (NEATROOTS_PRECHECK_TIMEOUT_MS) on the app the decisions are tested
 * on: it also covers the run's connecting and first export, which took up to a second on a
 * loaded machine, and these tests are about the answer, not its bound. The policy's asking is
 * given as long (the SDK's default is 1 s: unanswered, no call is checked). An answer that comes
 * in under half of it was answered, not timed out.
 */
const WAIT_MS = 30_000;
const ANSWERED_MS = 15_000;

const homes: string[] = [];
let app: EmbeddedApp;
let client: NeatrootsClient;

/** An embedded app with the refund rule in project shop (steering on, fail closed), waiting `waitMs` for a pre-call check's spans. */
async function startApp(waitMs: number): Promise<EmbeddedApp> {
  const home = tempHome('neatroots-precheck');
  homes.push(home);
  const project = path.join(home, 'shop');
  fs.mkdirSync(path.join(project, '.neatroots', 'checks'), { recursive: true });
  fs.writeFileSync(path.join(project, '.neatroots', 'checks', 'refund.yaml'), RULE);
  registerProject(home, { name: 'shop', path: project, steering: true });
  const config = testConfig(home, {
    NEATROOTS_API_KEYS: `shop=${KEY}`,
    NEATROOTS_PRECHECK_TIMEOUT_MS: String(waitMs),
    NEATROOTS_PRECHECK_FAIL_CLOSED: 'shop',
  });
  return startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
}

beforeAll(async () => {
  app = await startApp(WAIT_MS);
  client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, precheckPolicyTimeoutMs: WAIT_MS, onError: () => undefined });
}, 120_000);

afterAll(async () => {
  await client?.close();
  await app?.close();
  for (const home of homes) fs.rmSync(home, { recursive: true, force: true });
});

describe('pre-call checks on the embedded default', () => {
  it('never executes a refund without a lookup, and records the refusal as a halt', async () => {
    const run = client.startRun({ workflow: 'refunds' });
    await run.toolCall('search_kb', { q: 'refund policy' }, () => 'refunds within 30 days');
    const refunded: number[] = [];
    await expect(run.toolCall('issue_refund', { order: 7 }, () => refunded.push(7))).rejects.toBeInstanceOf(RunHaltedError);
    expect(refunded).toEqual([]);
    expect(run.haltNote).toMatchObject({ check_id: 'refund-without-lookup', text: 'Look the order up before refunding it.' });
    await run.end();
    // The refused call reaches the live engine like any span: the halt is on the run's record.
    const deadline = Date.now() + 20_000;
    let findings: { check_id: string; action: string }[] = [];
    while (Date.now() < deadline && !findings.some((f) => f.check_id === 'refund-without-lookup')) {
      const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/shop/findings?run_id=${run.id}`, { headers: { 'x-api-key': KEY } });
      findings = ((await res.json()) as { findings: { check_id: string; action: string }[] }).findings;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(findings).toEqual(expect.arrayContaining([expect.objectContaining({ check_id: 'refund-without-lookup', action: 'halt' })]));
  });

  it("tells onNote of a refused call's halt once, though the live engine's note of the same finding comes after it", async () => {
    // A stream watching the whole project: shows when the live engine's note reached ingest.
    const raw = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    const watched: v1.Note[] = [];
    const watch = raw.subscribe({ run_id: '' }, md);
    watch.on('data', (n: v1.Note) => watched.push(n));
    watch.on('error', () => undefined);
    await once(watch, 'metadata');
    const own = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, subscribe: false, precheckPolicyTimeoutMs: WAIT_MS, onError: () => undefined });
    try {
      const run = own.startRun({ workflow: 'refunds' });
      const notes: string[] = [];
      run.onNote((n) => notes.push(`${n.kind}:${n.check_id}`));
      await expect(run.toolCall('issue_refund', { order: 11 }, () => undefined)).rejects.toBeInstanceOf(RunHaltedError);
      expect(notes).toEqual(['halt:refund-without-lookup']);
      // The refused call is exported; the live engine raises the same finding and sends its halt.
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && !watched.some((n) => n.run_id === run.id && n.kind === 'halt')) {
        await run.flush();
        await new Promise((r) => setTimeout(r, 50));
      }
      const live = watched.find((n) => n.run_id === run.id && n.kind === 'halt');
      expect(live).toMatchObject({ check_id: 'refund-without-lookup', finding_id: run.haltNote?.finding_id });
      // It comes piggybacked on the run's next export (no stream of its own).
      run.span({ type: 'llm', name: 'after' });
      await run.flush();
      await run.end();
      // (Library checks may add notes of their own: a run that ended halted failed.)
      expect(notes.filter((n) => n.startsWith('halt:'))).toEqual(['halt:refund-without-lookup']);
    } finally {
      watch.cancel();
      raw.close();
      await own.close();
    }
  });

  it('serves the policy (the tools a halting rule names, the fail mode) and refuses bad questions', async () => {
    const raw = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    const call = <Req, Res>(method: 'preCheck' | 'preCheckPolicy', req: Req, meta = md) =>
      new Promise<{ err?: { code: number; details: string }; res?: Res }>((resolve) =>
        (raw[method] as unknown as (r: Req, m: Metadata, cb: (e: { code: number; details: string } | null, r: Res) => void) => void).call(raw, req, meta, (e, r) =>
          resolve(e ? { err: e } : { res: r }),
        ),
      );
    expect((await call<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: 'refunds' })).res).toEqual({ tools: ['issue_refund'], fail_closed: true, timeout_ms: WAIT_MS });
    const noSpan = await call<v1.PreCheckRequest, v1.PreCheckResponse>('preCheck', { known_spans: 0, timeout_ms: 100 });
    expect(noSpan.err).toMatchObject({ code: status.INVALID_ARGUMENT, details: 'span: is required (the call about to run)' });
    const stranger = new Metadata();
    stranger.set('x-api-key', 'nope');
    expect((await call<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: '' }, stranger)).err?.code).toBe(status.UNAUTHENTICATED);
    raw.close();
  });

  it("waits no longer than NEATROOTS_PRECHECK_TIMEOUT_MS, whatever timeout_ms asks: spans that never come end the check then", async () => {
    // An app of its own with a 2000 ms wait: the bound is the point here.
    const bounded = await startApp(2000);
    const raw = new v1.IngestClient(`127.0.0.1:${bounded.ingest.grpcPort}`, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('x-api-key', KEY);
      const span: v1.Span = { run_id: 'never-exported', span_id: 'call', parent_id: '', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: '', model: '', project: '', workflow: '', session_id: '' };
      const started = Date.now();
      // Five spans said to be exported that never come, no deadline, the longest wait the field holds (about 24.8 days).
      const err = await new Promise<{ code: number; details: string } | null>((resolve) => raw.preCheck({ span, known_spans: 5, timeout_ms: 2_147_483_647 }, md, (e) => resolve(e)));
      const took = Date.now() - started;
      expect(err).toMatchObject({ code: status.DEADLINE_EXCEEDED, details: expect.stringContaining('within 2000 ms') });
      expect(took).toBeLessThan(10_000);
    } finally {
      raw.close();
      await bounded.close();
    }
  }, 120_000);

  it('counts only the spans ingest took: a span it rejected does not hold the next check up to its timeout (fail closed)', async () => {
    const errors: Error[] = [];
    const own = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, subscribe: false, precheckPolicyTimeoutMs: WAIT_MS, onError: (e) => errors.push(e) });
    try {
      const run = own.startRun({ workflow: 'refunds' });
      run.span({ type: 'llm', name: 'bad', start_ms: 2000, end_ms: 1000 }); // ends before it starts: rejected
      await run.toolCall('lookup_order', { order: 8 }, () => ({ owner: 'c2' }));
      const refunded: number[] = [];
      const t = Date.now();
      await run.toolCall('issue_refund', { order: 8 }, () => refunded.push(8));
      expect(refunded).toEqual([8]);
      expect(Date.now() - t).toBeLessThan(ANSWERED_MS); // answered, not the 30 s timeout
      expect(errors.map((e) => e.name)).toContain('ExportRejectedError');
      await run.end();
    } finally {
      await own.close();
    }
  });

  it('counts a span acknowledged twice once: the same span id recorded again does not hold every later check up to its timeout (fail closed)', async () => {
    const own = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, subscribe: false, precheckPolicyTimeoutMs: WAIT_MS, onError: () => undefined });
    try {
      const run = own.startRun({ workflow: 'refunds' });
      // One span exported twice, as an export retried after ingest took it sends it again: ingest
      // acknowledges both, the run's window counts the span once.
      run.span({ type: 'llm', name: 'chat', span_id: 'same-span' });
      await run.flush();
      run.span({ type: 'llm', name: 'chat', span_id: 'same-span' });
      await run.toolCall('lookup_order', { order: 9 }, () => ({ owner: 'c3' }));
      const refunded: number[] = [];
      for (const order of [9, 10]) {
        const t = Date.now();
        await run.toolCall('issue_refund', { order }, () => refunded.push(order));
        expect(Date.now() - t).toBeLessThan(ANSWERED_MS); // answered, not the 30 s timeout
      }
      expect(refunded).toEqual([9, 10]);
      await run.end();
    } finally {
      await own.close();
    }
  });

  it('executes a refund after a lookup in the same run', async () => {
    const run = client.startRun({ workflow: 'refunds' });
    await run.toolCall('lookup_order', { order: 7 }, () => ({ owner: 'c1' }));
    const refunded: number[] = [];
    await run.toolCall('issue_refund', { order: 7 }, () => refunded.push(7));
    expect(refunded).toEqual([7]);
    expect(run.halted).toBe(false);
    await run.end();
  });

  it('halts any later call of a run the live engine already halted (a refund recorded without a lookup)', async () => {
    const own = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, subscribe: false, precheckPolicyTimeoutMs: WAIT_MS, onError: () => undefined });
    const raw = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    try {
      const run = own.startRun({ workflow: 'refunds' });
      // Recorded as it ran, never asked about: the live engine halts the run once its wait is over.
      run.span({ type: 'tool', name: 'issue_refund', tool: 'issue_refund', input: { order: 9 } });
      await run.flush();
      const deadline = Date.now() + 20_000;
      let halt: { id: string; check_id: string; action: string } | undefined;
      while (Date.now() < deadline && !halt) {
        const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/shop/findings?run_id=${run.id}`, { headers: { 'x-api-key': KEY } });
        halt = ((await res.json()) as { findings: { id: string; check_id: string; action: string }[] }).findings.find((f) => f.check_id === 'refund-without-lookup' && f.action === 'halt');
        if (!halt) await new Promise((r) => setTimeout(r, 50));
      }
      expect(halt).toBeDefined();
      // A call no rule names in itself, asked about as an SDK with precheck 'on' would: halted, naming the run's halt.
      const span: v1.Span = { run_id: run.id, span_id: 'later', parent_id: '', type: 'tool', name: 'search_kb', tool: 'search_kb', status: '', model: '', project: '', workflow: '', session_id: '' };
      const answer = await new Promise<v1.PreCheckResponse>((resolve, reject) => raw.preCheck({ span, known_spans: 1, timeout_ms: WAIT_MS }, md, (e, r) => (e ? reject(e) : resolve(r))));
      expect(answer).toMatchObject({ decision: 'halt', check_id: 'refund-without-lookup', finding_id: halt!.id, text: 'Look the order up before refunding it.' });
      await run.end();
    } finally {
      raw.close();
      await own.close();
    }
  });
});
