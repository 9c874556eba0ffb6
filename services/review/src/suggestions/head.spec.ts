import * as path from 'node:path';
import { readFolder } from '@neatroots/sop';
import { issuesWith } from './head';

const FIXTURE = path.resolve(__dirname, '../../../../libs/sop/fixtures/luigis');
const head = [...readFolder(FIXTURE)].map(([p, text]) => ({ path: p, text, version: 'v' }));
const FILE = head.find((f) => f.path === 'procedures/take-order.md')!.text;

describe('issuesWith: what a proposal, and a clean merge, must pass', () => {
  it('none for a file that compiles with the rest of head and defines the procedure', () => {
    expect(issuesWith(head, 'procedures/take-order.md', FILE.replace('Place the order.', 'Place the order now.'), 'take-order')).toEqual([]);
  });

  it('a merged file that no longer defines the procedure is refused, naming the file', () => {
    // Both sides deleted different halves of the file: they merge cleanly into nothing.
    for (const text of ['', FILE.slice(FILE.indexOf('## Steps'))]) {
      const issues = issuesWith(head, 'procedures/take-order.md', text, 'take-order');
      expect(issues.length).toBeGreaterThan(0);
      expect(issues[0]).toMatchObject({ file: 'procedures/take-order.md', line: 1 });
    }
  });

  it("sopc's errors with the rest of head", () => {
    const issues = issuesWith(head, 'procedures/take-order.md', FILE.replace('## Never', '## Nevers'), 'take-order');
    expect(issues.map((i) => i.message).join('\n')).toContain('unknown section');
  });
});
