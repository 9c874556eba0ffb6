import * as fs from 'node:fs';
import { credentials, Metadata, type ClientReadableStream } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { createLogger, until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig, tempHome } from './test-app.test';

/**
 * Checks in one group are one problem per run, and the agent gets one note for it: also when
 * the group's checks live in two services. The library's `tool-result` group holds a rule (a
 * failed tool call left unmentioned, from the rule engine) and questions (a failed call carried
 * on as if it had worked, from the question service). A run that trips both gets the rule's
 * note only; both findings are recorded. Embedded, with the decision model a local
 * OpenAI-compatible server and the agent listening on a project-wide Subscribe stream.
 */
const KEY = 'group-key';
const PROJECT = 'shop';
const IGNORED = 'Did a tool call fail';

describe('one note per group per run, across the rule engine and the question service', () => {
  let home: string;
  let app: EmbeddedApp;
  let fake: FakeOpenAI;
  let client: NeatrootsClient;
  let grpc: v1.IngestClient;
  let stream: ClientReadableStream<v1.Note>;
  const notes: v1.Note[] = [];

  beforeAll(async () => {
    fake = await startFakeOpenAI((call) => {
      if (call.kind === 'judge') return judgeReply(call, (q) => (q.ask.startsWith(IGNORED) ? { p: 0.95, quote: 'Your refund went through' } : { p: 0.05 }));
      if (call.kind === 'second_look') return { json: { holds: true, quote: 'Your refund went through', reason: 'the refund call failed' } };
      if (call.kind === 'plan') return { json: { pick: [], new: [] } };
      return { content: 'Tell the customer the refund failed.' };
    });
    home = tempHome('neatroots-group-note');
    app = await startEmbedded({
      config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_DECISION_MODEL_URL: fake.url, NEATROOTS_DECISION_MODEL_NAME: 'judge-test' }),
      inMemoryDb: true,
      watch: false,
      log: createLogger({ level: 'error' }),
    });
    grpc = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', KEY);
    // Every run of the project: notes that come after the run ended still arrive here.
    stream = grpc.subscribe({ run_id: '' }, md);
    stream.on('data', (n: v1.Note) => notes.push(n));
    stream.on('error', () => undefined);
    await until('the Subscribe stream open at ingest', () => app.ingest.metrics.subscribers >= 1, 30_000);
    client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
  });

  afterAll(async () => {
    stream?.cancel();
    grpc?.close();
    await client?.close();
    await app?.close();
    await fake?.close();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  async function findings(runId: string): Promise<{ check_id: string; group: string | null; active_at: string | null }[]> {
    const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`, { headers: { 'x-api-key': KEY } });
    if (!res.ok) return [];
    return ((await res.json()) as { findings: { check_id: string; group: string | null; active_at: string | null }[] }).findings;
  }

  it('sends the first note of the group and holds back the other, while both findings are recorded', async () => {
    const run = client.startRun({ run_id: 'refund-1', workflow: 'support' });
    await run.toolCall('lookup_order', { order: 'A1' }, () => ({ order: 'A1', paid: 80 }));
    await expect(run.toolCall('issue_refund', { order: 'A1' }, () => Promise.reject(new Error('payment gateway refused the refund')))).rejects.toThrow('refused');
    await run.end({ final_output: 'Your refund went through: 80 EUR, back on your card in 3 days.' });

    await until('both findings of the group', async () => {
      const ids = (await findings('refund-1')).map((f) => f.check_id);
      return ids.includes('unrecovered-tool-error') && ids.includes('ignored-tool-error');
    }, 30_000);
    // Both services sent their group note to ingest: the rule engine's, then the question service's.
    await until('both notes at ingest', () => app.ingest.metrics.notes_received >= 2, 10_000);
    // Ingest routes each note as it takes it: one written to the stream, the other held back.
    expect(app.ingest.metrics.notes_delivered.stream).toBe(1);
    expect(app.ingest.metrics.notes_grouped).toBe(1);
    const ofRun = await until('the note at the agent', () => {
      const got = notes.filter((n) => n.run_id === 'refund-1');
      return got.length > 0 && got;
    }, 10_000);
    expect(ofRun.map((n) => n.check_id)).toEqual(['unrecovered-tool-error']);
    const byCheck = Object.fromEntries((await findings('refund-1')).map((f) => [f.check_id, f]));
    expect(byCheck['unrecovered-tool-error'].group).toBe('tool-result');
    expect(byCheck['ignored-tool-error'].group).toBe('tool-result');
    // The rule's finding became active when its note reached the agent; the question's had none.
    await until('the rule finding active', async () => (await findings('refund-1')).some((f) => f.check_id === 'unrecovered-tool-error' && f.active_at), 10_000);
    expect((await findings('refund-1')).find((f) => f.check_id === 'ignored-tool-error')!.active_at).toBeNull();

    // What an operator sees (the counters reach /metrics within a second).
    const grouped = /neatroots_notes_total\{[^}]*outcome="grouped"[^}]*\} 1\n/;
    await until('the grouped count on /metrics', async () => grouped.test(await (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text()), 5_000);
  });
});
