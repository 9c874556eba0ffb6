import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

const LUIGIS = path.resolve(__dirname, '../../../libs/sop/fixtures/luigis');
const KEY = 'luigis-key';

let server: SopopsServer;
let url: string;

beforeAll(async () => {
  server = await startSopopsServer('luigis', KEY);
  ({ url } = server);
}, 60_000);
afterAll(() => server.close());

const sopops = runSopops;

describe('sopops push and publish against a running server', () => {
  it('pushes a folder as head, says what is unpublished, then publishes it as release 1', async () => {
    const pushed = await sopops(['push', LUIGIS, '--workspace', 'luigis', '--url', url], { NEATROOTS_API_KEY: KEY });
    expect(pushed.err).toEqual([]);
    expect(pushed.code).toBe(0);
    expect(pushed.out[0]).toMatch(/^pushed \d+ files to luigis$/);
    expect(pushed.out).toContain('unpublished against no release yet:');
    expect(pushed.out).toContain('  added   procedures/take-order.md');
    const published = await sopops(['publish', '--workspace', 'luigis', '--url', url, '--key', KEY]);
    expect(published).toMatchObject({ code: 0, err: [] });
    expect(published.out[0]).toMatch(/^published release 1 \(rel_[\w-]+\) of luigis: 3 procedures, live$/);
    const again = await sopops(['push', LUIGIS, '--url', url, '--key', KEY], { NEATROOTS_WORKSPACE: 'luigis' });
    expect(again.out).toContain('nothing unpublished (head is release 1)');
  });

  it('refuses a folder that does not compile with sopc errors, sending nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sopops-push-'));
    try {
      fs.mkdirSync(path.join(dir, 'procedures'));
      fs.writeFileSync(path.join(dir, 'procedures', 'a.md'), '# A\n\n## Steps\n1. Do it. [tool: x, sometimes]\n');
      const r = await sopops(['push', dir, '--workspace', 'luigis', '--url', url, '--key', KEY]);
      expect(r.code).toBe(1);
      expect(r.err[0]).toMatch(/^procedures\/a\.md:4: /);
      expect(r.err[r.err.length - 1]).toContain('nothing was sent');
      const head = JSON.parse(await (await fetch(`${url}/v1/workspaces/luigis/head`, { headers: { 'x-api-key': KEY } })).text());
      expect(head.files.map((f: { path: string }) => f.path)).toContain('procedures/take-order.md');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says what is wrong: the server refusing, no server, no key', async () => {
    const wrongKey = await sopops(['publish', '--workspace', 'luigis', '--url', url, '--key', 'nope']);
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.err[0]).toContain('401 unauthorized');
    const other = await sopops(['publish', '--workspace', 'someone-else', '--url', url, '--key', KEY]);
    expect(other.err[0]).toContain('403 forbidden');
    const down = await sopops(['publish', '--workspace', 'luigis', '--url', 'http://127.0.0.1:9', '--key', KEY]);
    expect(down.code).toBe(1);
    expect(down.err[0]).toContain('cannot reach the neatroots API at http://127.0.0.1:9');
    const noKey = await sopops(['publish', '--workspace', 'luigis', '--url', url]);
    expect(noKey.code).toBe(2);
    expect(noKey.err[0]).toContain('an API key is needed');
  });
});
