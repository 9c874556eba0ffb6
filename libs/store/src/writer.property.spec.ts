/**
 * "What ingest accepts, the store can take" as a property: batches of arbitrary items that pass
 * ingest's limits (JSON up to the depth limit, token counts and times up to their bounds, any
 * text) go through the StoreWriter on a real database. Every item is stored: none is set aside,
 * none is lost, and the writer never hangs (the set-aside path is for what slips past ingest).
 */
import fc from 'fast-check';
import type { Db } from '@neatroots/ports';
import { DEFAULT_SPAN_LIMITS, RUN_END_STATUSES, SPAN_TYPES, normalizeItem, type Envelope, type LimitCheck } from '@neatroots/spans';
import { openTestDb, resetDb } from './test-db.test';
import { StoreWriter } from './writer';

const NOW = Date.now();
const ingest: LimitCheck = { limits: DEFAULT_SPAN_LIMITS, now: NOW };

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());

/** A JSON value nested exactly `depth` deep (ingest takes up to 64). */
const deepValue = fc.integer({ min: 1, max: DEFAULT_SPAN_LIMITS.maxJsonDepth - 2 }).map((d) => JSON.parse('{"a":'.repeat(d) + '1' + '}'.repeat(d)) as unknown);

function items(text: fc.Arbitrary<string>) {
  const json = fc.oneof(fc.jsonValue({ maxDepth: 3 }), deepValue, text);
  const time = fc.oneof(fc.integer({ min: 0, max: NOW + DEFAULT_SPAN_LIMITS.maxFutureMs }), fc.constant(NOW + DEFAULT_SPAN_LIMITS.maxFutureMs));
  const tokens = fc.oneof(fc.nat(DEFAULT_SPAN_LIMITS.maxTokens), fc.constant(DEFAULT_SPAN_LIMITS.maxTokens));
  const run = fc.constantFrom('r1', 'r2', 'r3');
  const span = fc.record({
    run_id: run, span_id: fc.string({ minLength: 1, maxLength: 8 }), type: fc.constantFrom(...SPAN_TYPES), name: text,
    status: fc.constantFrom('ok', 'error'), input: json, output: json, error: fc.option(text, { nil: undefined }),
    start_ms: time, usage: fc.record({ input_tokens: tokens, output_tokens: tokens }),
    attributes: fc.dictionary(text, json, { maxKeys: 4 }), workflow: fc.option(fc.string({ minLength: 1, maxLength: 12 }), { nil: undefined }),
  }, { requiredKeys: ['run_id', 'span_id', 'type', 'name', 'status'] });
  const start = fc.record({ event: fc.constant('run_start'), run_id: run, workflow: fc.string({ minLength: 1, maxLength: 12 }), system_prompt: text, user_message: text, ts_ms: time });
  const end = fc.record({ event: fc.constant('run_end'), run_id: run, status: fc.constantFrom(...RUN_END_STATUSES), final_output: json, ts_ms: time });
  return fc.array(fc.record({ project: fc.constantFrom('p1', 'p2'), raw: fc.oneof(span, start, end) }), { minLength: 1, maxLength: 25 });
}

/** Only what ingest accepts goes on: the rest was rejected there. */
function accepted(batch: { project: string; raw: unknown }[]): Envelope[] {
  const out: Envelope[] = [];
  for (const { project, raw } of batch) {
    try {
      out.push({ project, received_ms: NOW, item: normalizeItem(raw, ingest) });
    } catch {
      // rejected at ingest, with its reason (the parsers' own property tests)
    }
  }
  return out;
}

async function writeAll(envs: Envelope[]): Promise<void> {
  const w = new StoreWriter(db, { maxBatch: 10, flushMs: 1, retryBaseMs: 1, onError: () => undefined });
  const done = Promise.all([w.writeEvents(envs.slice(0, 10)), w.writeEvents(envs.slice(10))]);
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error('the writer did not finish in 30 s')), 30_000)));
  try {
    await Promise.race([done, hung]);
  } finally {
    clearTimeout(timer);
  }
  await w.close();
}

/** Every span is stored or set aside, and so is every run event (its run exists, or it was set aside). */
async function accountedFor(envs: Envelope[]): Promise<{ setAside: number }> {
  const spans = new Set((await db.query<{ k: string }>(`SELECT project || '/' || run_id || '/' || span_id AS k FROM spans`)).rows.map((r) => r.k));
  const runs = new Set((await db.query<{ k: string }>(`SELECT project || '/' || run_id AS k FROM runs`)).rows.map((r) => r.k));
  const letters = (await db.query<{ project: string; run_id: string; item_id: string | null; kind: string }>('SELECT project, run_id, item_id, kind FROM dead_letters')).rows;
  const aside = (project: string, runId: string, kind: string, id?: string) => letters.some((l) => l.project === project && l.run_id === runId && l.kind === kind && (id === undefined || l.item_id === id));
  for (const env of envs) {
    const it = env.item;
    if (it.kind === 'span') {
      expect(spans.has(`${env.project}/${it.span.run_id}/${it.span.span_id}`) || aside(env.project, it.span.run_id, 'span', it.span.span_id)).toBe(true);
    } else {
      expect(runs.has(`${env.project}/${it.run.run_id}`) || aside(env.project, it.run.run_id, it.kind)).toBe(true);
    }
  }
  return { setAside: letters.length };
}

describe('StoreWriter takes whatever ingest accepts (property)', () => {
  it('well-formed text: every accepted item is stored, none set aside', async () => {
    await fc.assert(
      fc.asyncProperty(items(fc.string({ maxLength: 40 })), async (batch) => {
        await resetDb(db);
        const envs = accepted(batch);
        await writeAll(envs);
        expect(await accountedFor(envs)).toEqual({ setAside: 0 });
      }),
      { numRuns: 15 },
    );
  }, 300_000);

  it('any text (half surrogate pairs, NUL, ...): every accepted item is stored too, none set aside', async () => {
    await fc.assert(
      fc.asyncProperty(items(fc.oneof(fc.string({ unit: 'binary', maxLength: 20 }), fc.constantFrom('\ud800', 'a\u0000b', '\udfff\ud800', 'cut \ud83d'))), async (batch) => {
        await resetDb(db);
        const envs = accepted(batch);
        await writeAll(envs);
        expect(await accountedFor(envs)).toEqual({ setAside: 0 });
      }),
      { numRuns: 15 },
    );
  }, 300_000);
});
