import { NeatrootsClient } from '@neatroots/sdk';
import type { EmbeddedApp } from './embedded';
import { jsonApi } from './test-app.test';

/**
 * Sends one ended run for each id (a lookup_order tool call, then its answer) through the SDK
 * into an embedded app, and waits until the API shows every one of them ended (20 s at most).
 */
export async function sendEndedRuns(app: EmbeddedApp, project: string, key: string, ids: readonly string[]): Promise<void> {
  const api = jsonApi(() => `http://127.0.0.1:${app.httpPort}`, key);
  const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: key, flushIntervalMs: 20 });
  for (const id of ids) {
    const run = agent.startRun({ run_id: id, workflow: 'support' });
    run.span({ type: 'tool', tool: 'lookup_order', input: { order: 7 }, output: 'order 7' });
    await run.end({ final_output: `We will call you back about order 7 (${id}).` });
  }
  await agent.flush();
  await agent.close();
  const deadline = Date.now() + 20_000;
  for (const id of ids) {
    for (;;) {
      const r = await api<{ run?: { end_status: string | null } }>('GET', `/v1/projects/${project}/runs/${id}`);
      if (r.status === 200 && r.body.run?.end_status) break;
      if (Date.now() > deadline) throw new Error(`run ${id} not stored`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }
}
