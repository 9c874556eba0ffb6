import { loadChecks, type FindingEvent } from '@neatroots/checks';
import { credentials, Metadata } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { itemToEvent, normalizeItem, type StreamItem } from '@neatroots/spans';
import { Replayer } from '../../packages/neatroots/src/replay';

/**
 * The fault tests' yardstick (distributed and embedded): a deterministic fleet, what
 * `neatroots replay` finds in it, and the difference from what a deployment stored.
 */
const TOOLS = ['search', 'lookup_order', 'send_email', 'fetch_page'];

/** A deterministic fleet, in arrival order (runs interleaved): loops, error streaks, secrets, failed runs. */
export function fleet(project: string, runs: number, perRun: number): StreamItem[] {
  let seed = 7;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
  const t0 = Date.now();
  const state = Array.from({ length: runs }, (_, i) => ({ id: `run-${i}`, n: 0 }));
  const out: StreamItem[] = [];
  let t = t0;
  const raw: Record<string, unknown>[] = [];
  while (state.length) {
    const i = Math.floor(rnd() * Math.min(state.length, 40));
    const r = state[i];
    t += 1;
    if (r.n === 0) raw.push({ event: 'run_start', run_id: r.id, project, workflow: 'support', ts_ms: t });
    if (r.n < perRun) {
      r.n++;
      const tool = TOOLS[Math.floor(rnd() * TOOLS.length)];
      const failed = rnd() < 0.15;
      raw.push({
        run_id: r.id, span_id: `s${r.n}`, type: 'tool', tool, input: { q: `q${Math.floor(rnd() * 2)}` },
        output: failed ? undefined : rnd() < 0.02 ? 'api_key = abcdefgh12345678' : { ok: true },
        ...(failed ? { error: 'upstream 503' } : {}), start_ms: t - 5, end_ms: t,
      });
    } else {
      state.splice(i, 1);
      raw.push({ event: 'run_end', run_id: r.id, status: rnd() < 0.1 ? 'error' : 'ok', final_output: 'Done.', ts_ms: t });
    }
  }
  for (const r of raw) out.push(normalizeItem(r));
  return out;
}

/** What replay computes: finding id -> final status. */
export const checkOf = new Map<string, string>();

export async function expected(items: StreamItem[], home: string): Promise<Map<string, string>> {
  const checks = loadChecks({ home }).checks;
  const out = new Map<string, string>();
  const r = new Replayer({
    checks,
    onFinding: (f: FindingEvent) => {
      // Rule checks: the question service answers questions in its own process (its tests cover it).
      if (f.kind !== 'rule') return;
      checkOf.set(f.id, `${f.check_id}/${f.run_id}`);
      out.set(f.id, f.status === 'resolved' ? 'resolved' : 'open');
    },
    log: () => undefined,
  });
  for (const item of items) await r.push(item);
  await r.end();
  return out;
}

export function compare(got: Map<string, string>, want: Map<string, string>): { missing: string[]; extra: string[]; wrongState: string[] } {
  return {
    missing: [...want.keys()].filter((k) => !got.has(k)),
    extra: [...got.keys()].filter((k) => !want.has(k)),
    wrongState: [...want.entries()].filter(([k, s]) => got.has(k) && got.get(k) !== s).map(([k]) => k),
  };
}

/**
 * Sends the fleet over gRPC in batches of 100, each retried until acknowledged, calling
 * `during` at each tenth sent (where the fault tests strike).
 */
export async function send(port: number, key: string, items: StreamItem[], during: (sentFraction: number) => Promise<void>): Promise<void> {
  const client = new v1.IngestClient(`127.0.0.1:${port}`, credentials.createInsecure());
  const md = new Metadata();
  md.set('x-api-key', key);
  const batch = 100;
  const marks = new Set<number>();
  try {
    for (let i = 0; i < items.length; i += batch) {
      const req: v1.ExportRequest = { events: items.slice(i, i + batch).map(itemToEvent), note_runs: [] };
      // Retried until acknowledged: UNAVAILABLE means nothing of the batch was taken (a
      // broker restart takes a while: retried for up to two minutes).
      const giveUp = Date.now() + 120_000;
      for (;;) {
        const err = await new Promise<Error | null>((resolve) => client.export(req, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)));
        if (!err) break;
        if (Date.now() > giveUp) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
      const frac = Math.floor(((i + batch) / items.length) * 10) / 10;
      if (!marks.has(frac)) {
        marks.add(frac);
        await during(frac);
      }
      await new Promise((r) => setTimeout(r, 15));
    }
  } finally {
    client.close();
  }
}
