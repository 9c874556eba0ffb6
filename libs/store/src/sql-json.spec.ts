import type { Db } from '@neatroots/ports';
import { endEnv, spanEnv } from './fixtures.test';
import { RunsRepo } from './runs.repo';
import { json, storableJson } from './sql';
import { openTestDb, resetDb } from './test-db.test';

describe('json(): text jsonb takes', () => {
  it('writes half of a surrogate pair (an emoji cut in two) as U+FFFD, and leaves whole pairs and literal text alone', () => {
    expect(JSON.parse(json({ a: 'cut: \ud83d', b: '\ude00 end' }) as string)).toEqual({ a: 'cut: \ufffd', b: '\ufffd end' });
    expect(JSON.parse(json('whole: 😀') as string)).toBe('whole: 😀');
    // the six characters \ud800 typed as text are not an escape
    expect(JSON.parse(json('typed: \\ud800') as string)).toBe('typed: \\ud800');
    expect(JSON.parse(json('typed then half: \\\ud800') as string)).toBe('typed then half: \\\ufffd');
  });

  it('fixes texts joined by line breaks as it fixes each alone (an escape at either end of a line, after backslashes)', () => {
    const values = ['\u0000 at the start', 'at the end \ud83d', 'typed: \\u0000', 'typed then NUL: \\\u0000', { k: '\\', v: '\ude00' }, 'plain', '\\'];
    const each = values.map((v) => json(v)).join('\n');
    expect(storableJson(values.map((v) => JSON.stringify(v)).join('\n'))).toBe(each);
    expect(each).not.toContain('\\u0000 at');
    expect(each.split('\n').map((l) => JSON.parse(l) as unknown)).toEqual(['\ufffd at the start', 'at the end \ufffd', 'typed: \\u0000', 'typed then NUL: \\\ufffd', { k: '\\', v: '\ufffd' }, 'plain', '\\']);
  });

  describe('on the database', () => {
    let db: Db;
    beforeAll(async () => {
      db = await openTestDb();
    }, 60_000);
    afterAll(() => db.close());
    beforeEach(() => resetDb(db));

    it("stores a run whose final output ends in half an emoji (jsonb refused it before)", async () => {
      const repo = new RunsRepo(db);
      await repo.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's1', output: 'ok \ud83d' }), endEnv('p1', { run_id: 'r1', status: 'ok', final_output: 'Here you are \ud83d' })]);
      const run = await repo.get('p1', 'r1');
      expect(run).toMatchObject({ end_status: 'ok', final_output: 'Here you are \ufffd', span_count: 1 });
    });
  });
});
