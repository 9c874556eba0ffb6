import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DEFAULT_SPAN_LIMITS, JsonlError } from '@neatroots/spans';
import { readItems } from './replay';

/** A replayed file is held to ingest's nesting and size limits, and reported by line, not by a stack overflow. */
describe('replay: limits on what a line holds', () => {
  let dir: string;
  beforeAll(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-replay-limits-'))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const span = (id: string, input: string) => `{"run_id":"r1","span_id":"${id}","type":"tool","name":"search","tool":"search","status":"ok","input":${input}}`;

  async function read(file: string): Promise<unknown[]> {
    const out: unknown[] = [];
    for await (const item of readItems([file])) out.push(item);
    return out;
  }

  it('reports JSON nested 200,000 deep with its file, line and field', async () => {
    const file = path.join(dir, 'deep.jsonl');
    fs.writeFileSync(file, [span('s0', '{"q":1}'), span('s1', '['.repeat(200_000) + ']'.repeat(200_000))].join('\n'));
    const err = await read(file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JsonlError);
    expect((err as Error).message).toBe(`${file}:2: input: is JSON nested more than 64 levels deep (NEATROOTS_MAX_JSON_DEPTH)`);
  });

  it('holds a line to the limits given (the environment\'s NEATROOTS_MAX_*), and still to no clock', async () => {
    const file = path.join(dir, 'given.jsonl');
    fs.writeFileSync(file, `${span('s0', '{"a":{"b":{"c":1}}}')}\n`);
    expect(await read(file)).toHaveLength(1);
    const out: unknown[] = [];
    const err = await (async () => {
      for await (const item of readItems([file], { ...DEFAULT_SPAN_LIMITS, maxJsonDepth: 2, maxFutureMs: 0 })) out.push(item);
    })().catch((e: unknown) => e);
    expect((err as Error).message).toBe(`${file}:1: input: is JSON nested more than 2 levels deep (NEATROOTS_MAX_JSON_DEPTH)`);
    const future = path.join(dir, 'given-future.jsonl');
    fs.writeFileSync(future, `{"run_id":"r1","span_id":"s0","type":"tool","name":"search","status":"ok","start_ms":${Date.UTC(2400, 0, 1)}}\n`);
    for await (const item of readItems([future], { ...DEFAULT_SPAN_LIMITS, maxFutureMs: 0 })) out.push(item);
    expect(out).toHaveLength(1);
  });

  it('takes recorded times, however far from this clock', async () => {
    const file = path.join(dir, 'future.jsonl');
    fs.writeFileSync(file, `{"run_id":"r1","span_id":"s0","type":"tool","name":"search","status":"ok","start_ms":${Date.UTC(2400, 0, 1)}}\n`);
    expect(await read(file)).toHaveLength(1);
  });
});
