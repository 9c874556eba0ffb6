import * as fs from 'node:fs';
import * as path from 'node:path';
import { NeatrootsClient, type Note, type Run } from '@neatroots/sdk';
import { parseJsonl, type RunStart, type Span, type StreamItem } from '@neatroots/spans';
import { DEMO_DIR } from './embedded';

export const DEMO_FLEET = path.join(DEMO_DIR, 'fleet.jsonl');

export interface DemoEvent {
  kind: 'note' | 'halt' | 'run';
  run_id: string;
  text: string;
}

interface RecordedRun {
  start?: RunStart;
  spans: Span[];
  end?: Extract<StreamItem, { kind: 'run_end' }>['run'];
}

/**
 * The sample fleet, replayed through the real gRPC ingest by agents written with the SDK:
 * each recorded run becomes a live run (its times moved to now), the runs interleave as a
 * fleet's do, each step waits a little, and an agent stops when a halt reaches it.
 */
export async function runDemoFleet(opts: {
  address: string;
  apiKey: string;
  onEvent: (e: DemoEvent) => void;
  stepMs?: number;
  file?: string;
}): Promise<{ runs: number; runIds: string[]; spans: number; notes: number; halted: string[] }> {
  const items = parseJsonl(fs.readFileSync(opts.file ?? DEMO_FLEET, 'utf8'), opts.file ?? DEMO_FLEET);
  const runs = new Map<string, RecordedRun>();
  for (const item of items) {
    const id = item.kind === 'span' ? item.span.run_id : item.run.run_id;
    const r = runs.get(id) ?? { spans: [] };
    if (item.kind === 'run_start') r.start = item.run;
    else if (item.kind === 'run_end') r.end = item.run;
    else r.spans.push(item.span);
    runs.set(id, r);
  }
  const client = new NeatrootsClient({ address: opts.address, apiKey: opts.apiKey, maxBatch: 20, flushIntervalMs: 20 });
  const suffix = Date.now().toString(36);
  const stepMs = opts.stepMs ?? 60;
  let spans = 0;
  let notes = 0;
  const halted: string[] = [];
  // The ids the runs are sent under (the recorded ones with this replay's suffix).
  const runIds = [...runs.keys()].map((id) => `${id}-${suffix}`);
  try {
    await Promise.all(
      [...runs.entries()].map(async ([id, rec], i) => {
        await sleep(i * 25);
        const run: Run = client.startRun({
          run_id: `${id}-${suffix}`,
          workflow: rec.start?.workflow,
          session_id: rec.start?.session_id,
          system_prompt: rec.start?.system_prompt,
          user_message: rec.start?.user_message,
          tools: rec.start?.tools,
        });
        run.onNote((n: Note) => {
          notes++;
          opts.onEvent({ kind: n.kind === 'halt' ? 'halt' : 'note', run_id: id, text: `${n.title}: ${n.text}` });
        });
        await run.whenSubscribed();
        const first = rec.spans[0]?.start_ms ?? 0;
        const base = Date.now();
        for (const s of rec.spans) {
          if (run.halted) break;
          const shift = (t: number | undefined) => (t === undefined ? undefined : base + (t - first));
          run.span({
            span_id: s.span_id,
            type: s.type,
            name: s.name,
            tool: s.tool,
            input: s.input,
            output: s.output,
            error: s.error,
            status: s.status,
            start_ms: shift(s.start_ms),
            end_ms: shift(s.end_ms),
            usage: s.usage,
            model: s.model,
          });
          spans++;
          await run.flush();
          await sleep(stepMs);
        }
        // Give a halt raised by the last step (requires_before waits 250 ms) time to arrive.
        await sleep(400);
        if (run.halted) {
          halted.push(id);
          await run.end({ status: 'interrupted' });
        } else {
          await run.end({ status: rec.end?.status ?? 'ok', final_output: rec.end?.final_output });
        }
        opts.onEvent({ kind: 'run', run_id: id, text: run.halted ? 'halted' : `ended ${rec.end?.status ?? 'ok'}` });
      }),
    );
    await sleep(300);
  } finally {
    await client.close();
  }
  return { runs: runs.size, runIds, spans, notes, halted };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
