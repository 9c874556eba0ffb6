import * as fs from 'node:fs';
import * as path from 'node:path';
import { defaultLibraryDir, loadChecks, type FindingEvent } from '@neatroots/checks';
import { readItems, Replayer, Summary, type SummaryLine } from './replay';

/**
 * The shipped library, tested as data (Falco's e2e suites are the model): every check has
 * example runs in library/examples/<check-id>/, and replaying them with the library must give
 * exactly the findings listed in expected.jsonl (one summary line per check and run).
 */
const library = defaultLibraryDir();
const examples = path.join(library, 'examples');
const checks = loadChecks({ home: false }).checks;
const suites = fs.existsSync(examples) ? fs.readdirSync(examples).filter((d) => fs.statSync(path.join(examples, d)).isDirectory()) : [];

async function summarise(files: string[]): Promise<SummaryLine[]> {
  const summary = new Summary();
  const r = new Replayer({ checks, onFinding: (f: FindingEvent) => summary.add(f), log: () => undefined });
  for await (const item of readItems(files)) await r.push(item);
  await r.end();
  return summary.lines();
}

const key = (l: SummaryLine) => `${l.check_id}|${l.run_id}`;

describe('the shipped check library', () => {
  it('has example runs for every check it ships', () => {
    const ids = checks.filter((c) => c.source === 'library').map((c) => c.id);
    expect(ids.length).toBeGreaterThan(5);
    expect(ids.filter((id) => !suites.includes(id))).toEqual([]);
  });

  it.each(suites)('%s: replaying its examples gives the expected findings', async (suite) => {
    const dir = path.join(examples, suite);
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl') && f !== 'expected.jsonl').sort().map((f) => path.join(dir, f));
    const expected = fs
      .readFileSync(path.join(dir, 'expected.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as SummaryLine);
    expect(expected.some((e) => e.check_id === suite)).toBe(true);
    const got = await summarise(files);
    // Other library checks may fire on the same runs too: compare the lines the suite names,
    // and require that the suite's own check fires nowhere else.
    const named = new Set(expected.map(key));
    expect(got.filter((g) => named.has(key(g))).sort((a, b) => key(a).localeCompare(key(b)))).toEqual(
      [...expected].sort((a, b) => key(a).localeCompare(key(b))),
    );
    expect(got.filter((g) => g.check_id === suite && !named.has(key(g)))).toEqual([]);
  });
});
