import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { servicesRequired } from '@neatroots/platform';
import { KEY, repoRoot, startServer, type Server } from './server';

/**
 * The Go client (clients/go): its tests against a running neatroots (a note received, a halt
 * stopping the next tool call), a module that `go get`s it and builds, and its generated code
 * in step with proto/. Go fetches the dependencies from the module proxy (cached after once).
 */
const run = promisify(execFile);
const mod = path.join(repoRoot, 'clients/go');
const MODULE = 'github.com/neatroots/neatroots/clients/go';

function goOrSkip(): string | undefined {
  const r = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (r.status === 0) return 'go';
  const why = 'no go on PATH (apt-get install golang-go, or a newer Go)';
  if (servicesRequired()) throw new Error(`the Go client needs Go and NEATROOTS_REQUIRE_SERVICES=1 forbids skipping (${why})`);
  process.stderr.write(`skipping the Go client: ${why}\n`);
  return undefined;
}
const go = goOrSkip();
const env = { ...process.env, GOFLAGS: '-mod=mod' };
const fail = (what: string) => (e: { stdout?: string; stderr?: string; message: string }) => {
  throw new Error(`${what} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
};

(go ? describe : describe.skip)('the Go client', () => {
  let server: Server;
  /** One taking at most 64 KiB in one message, below the 4 MiB the client fills exports to. */
  let small: Server;

  beforeAll(async () => {
    server = await startServer();
    small = await startServer({ NEATROOTS_MAX_MESSAGE_BYTES: String(64 * 1024) });
  });

  afterAll(async () => {
    await server?.close();
    await small?.close();
  });

  it('passes its tests against a running server: a note received, a halt stopping the next tool call, an export over the size bound not sent again', async () => {
    const res = await run(go!, ['test', '-count=1', '-v', './...'], {
      cwd: mod,
      env: { ...env, NEATROOTS_ADDRESS: server.address, NEATROOTS_SMALL_ADDRESS: small.address, NEATROOTS_API_KEY: KEY },
      timeout: 300_000,
    }).catch(fail('go test'));
    expect(res.stdout).toMatch(/--- PASS: TestANoteReachesTheRun/);
    expect(res.stdout).toMatch(/--- PASS: TestAHaltStopsTheNextToolCall/);
    expect(res.stdout).toMatch(/--- PASS: TestAnExportOverTheSizeBoundIsRefusedOnceNotRetried/);
    expect(res.stdout).toMatch(/--- PASS: TestASpanOverTheItemBoundIsCountedAsDropped/);
    expect(res.stdout).toMatch(/--- PASS: TestASpanRejectedInsideAnAcceptedExportIsCountedAsDropped/);
    expect(res.stdout).toMatch(/--- PASS: TestABatchOverALowerMessageBoundIsSentInHalves/);
    // the export path and notes streams against local servers standing in for ingest (export_test.go)
    for (const test of [
      'TestARefusedBatchIsRetriedUntilIngestTakesIt',
      'TestBackPressureIsRetriedAfterItsDelayAndAnotherRefusalIsNot',
      'TestTheQueueIsBoundedAndDropsTheOldest',
      'TestBatchesAreBoundedBySize',
      'TestAnExportFullInBytesIsSentAtOnce',
      'TestQueuedCountsTheBatchBeingSent',
      'TestAnAnswerOverFourMiBIsTaken',
      'TestARefusalNamingABoundTheBatchWasNotOverStillLowersTheExportSize',
      'TestAnAnswerAsCloseGivesUpCountsNoEventTwice',
      'TestARefusalAsCloseGivesUpCountsNoEventTwice',
      'TestOneFlusherWhileExportsAreSlow',
      'TestCloseGivesUpAtItsTimeout',
      'TestARefusedSubscriptionIsNotOpenAndBacksOff',
      'TestAStreamEndedByIngestIsReopened',
      'TestTheReconnectDelayStartsOverAfterTenSecondsOpen',
      'TestStartRunAfterCloseLeavesNothingRunning',
      'TestAPanickingOnNoteIsReported',
      'TestAnOutageIsReportedOnceWhileRetriedAgainAfterASuccess',
      'TestOnErrorMayFlushAndCloseTheClient',
      'TestFlushAndCloseWaitForTheReportsMadeBeforeThem',
      'TestCloseWaitsForASlowOnErrorAtLeastOneSecond',
      'TestRecordingAnEventNeverWaitsForOnError',
      'TestRunEndWaitsForItsExportNotForOnError',
      'TestTheReadmeUseSnippetBuilds',
    ]) {
      expect(res.stdout).toMatch(new RegExp(`--- PASS: ${test}\\b`));
    }
    expect(res.stdout).not.toMatch(/SKIP/);
  }, 300_000);

  it('is a module another module can go get and build against', async () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-goapp-'));
    try {
      fs.writeFileSync(path.join(app, 'main.go'), `package main

import (
\t"fmt"

\tneatroots "${MODULE}"
)

func main() {
\tc, err := neatroots.New(neatroots.Options{Address: "127.0.0.1:1", APIKey: "k", NoSubscribe: true})
\tif err != nil {
\t\tpanic(err)
\t}
\tfmt.Println(c.StartRun(neatroots.RunOptions{Workflow: "w"}).ID != "")
}
`);
      const opts = { cwd: app, env, timeout: 300_000 };
      await run(go!, ['mod', 'init', 'example.com/agent'], opts).catch(fail('go mod init'));
      // the checkout stands in for the repository's address
      await run(go!, ['mod', 'edit', `-replace=${MODULE}=${mod}`], opts).catch(fail('go mod edit'));
      await run(go!, ['get', `${MODULE}@v0.0.0`], opts).catch(fail('go get'));
      await run(go!, ['build', '-o', 'agent', '.'], opts).catch(fail('go build'));
      expect(fs.existsSync(path.join(app, 'agent'))).toBe(true);
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  }, 300_000);

  it('has generated code in step with proto/ (scripts/gen-go.sh)', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-gogen-'));
    try {
      await run(path.join(repoRoot, 'scripts/gen-go.sh'), [out], { env, timeout: 300_000 }).catch(fail('scripts/gen-go.sh'));
      const dir = 'neatroots/v1';
      const files = fs.readdirSync(path.join(out, dir)).sort();
      expect(files).toEqual(fs.readdirSync(path.join(mod, 'gen', dir)).sort());
      for (const f of files) {
        expect({ f, text: fs.readFileSync(path.join(mod, 'gen', dir, f), 'utf8') }).toEqual({ f, text: fs.readFileSync(path.join(out, dir, f), 'utf8') });
      }
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  }, 300_000);
});
