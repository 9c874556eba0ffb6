import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Metadata, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { LogBus } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { itemToEvent } from '@neatroots/spans';
import { startIngest, type IngestHandle } from './ingest';

/**
 * A full disk under the embedded bus log (a real tmpfs of 2 MiB, filled): every export is refused
 * alike until the next start, and ingest says so once, then at most every 30 s (it used to log
 * one ERROR with its stack for each refused export, thousands a second). Mounting needs root.
 */
function mountTmpfs(dir: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return (e as Error).message.split('\n')[0];
  }
}

const probe = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-pubfail-probe-'));
const cannotMount = mountTmpfs(probe);
if (!cannotMount) execFileSync('umount', [probe]);
fs.rmSync(probe, { recursive: true, force: true });
if (cannotMount) console.warn(`publish-failure-log spec: skipped, a tmpfs cannot be mounted here (${cannotMount}; it needs root)`);

(cannotMount ? describe.skip : describe)('ingest on a bus whose disk is full', () => {
  let dir: string;
  let bus: LogBus;
  let ingest: IngestHandle;
  let client: v1.IngestClient;
  let clock = Date.now();
  const errors: { msg: string; err: unknown }[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-pubfail-'));
    const failed = mountTmpfs(dir);
    if (failed) throw new Error(failed);
    bus = new LogBus({ dir: path.join(dir, 'bus') });
    ingest = await startIngest({
      bus,
      resolveKey: async (k) => (k === 'key-shop' ? 'shop' : undefined),
      otlpPort: 0,
      grpcPort: 0,
      now: () => clock,
      logger: { warn: () => undefined, error: (msg, err) => void errors.push({ msg, err }) },
    });
    client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await ingest?.close();
    await bus?.close().catch(() => undefined);
    execFileSync('umount', ['-l', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  let n = 0;
  const send = (): Promise<ServiceError | undefined> => {
    const m = new Metadata();
    m.set('x-api-key', 'key-shop');
    // A tool result of 64 KiB: the disk fills within a few exports.
    const ev = itemToEvent({ kind: 'span', span: { run_id: `r${n % 7}`, span_id: `s${n++}`, type: 'tool', name: 'search', status: 'ok', output: 'x'.repeat(65_536) } });
    return new Promise((resolve) => client.export(v1.ExportRequest.fromPartial({ events: [ev] }), m, (err) => resolve(err ?? undefined)));
  };

  it('refuses every export with UNAVAILABLE and logs the failure once, then at most once every 30 s with how many were not', async () => {
    // Fill the disk: exports are acknowledged until a write of the bus log fails.
    let refused: ServiceError | undefined;
    for (let i = 0; i < 200 && !refused; i++) refused = await send();
    expect(refused).toMatchObject({ code: status.UNAVAILABLE, details: expect.stringContaining('ENOSPC') });
    expect(errors).toHaveLength(1);
    expect(errors[0].msg).toMatch(/^ingest: publishing 1 items failed$/);

    // 320 more refused exports, 40 at a time: not one more line within the 30 s.
    for (let round = 0; round < 8; round++) {
      const answers = await Promise.all(Array.from({ length: 40 }, send));
      for (const a of answers) expect(a?.code).toBe(status.UNAVAILABLE);
    }
    expect(errors).toHaveLength(1);

    // 30 s later, the next refusal is logged again, saying how many were not; then quiet again.
    clock += 30_000;
    for (let i = 0; i < 20; i++) expect((await send())?.code).toBe(status.UNAVAILABLE);
    expect(errors.map((e) => e.msg)).toEqual(['ingest: publishing 1 items failed', 'ingest: publishing 1 items failed (320 more alike since the last such line, not logged)']);
  }, 60_000);
});
