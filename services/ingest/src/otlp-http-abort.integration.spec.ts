import * as net from 'node:net';
import { MemoryBus, within } from '@neatroots/platform';
import { startIngest, type IngestHandle } from './ingest';

/**
 * A client with a valid key that gives up an OTLP/HTTP upload partway (a browser tab closed, a
 * process killed, a timeout) is a normal disconnect: ingest used to log it at error level
 * ("ingest: OTLP/HTTP: unexpected error", aborted ECONNRESET, with a stack).
 */
describe('OTLP/HTTP: a client that aborts its upload', () => {
  let bus: MemoryBus;
  let ingest: IngestHandle;
  afterAll(async () => {
    await ingest?.close();
    await bus?.close();
  });

  it('is logged as a disconnect at debug level, in one line, and not as an error', async () => {
    bus = new MemoryBus();
    const lines: { level: 'debug' | 'warn' | 'error'; msg: string; err?: unknown }[] = [];
    let seen!: () => void;
    const lineLogged = new Promise<void>((r) => (seen = r));
    const record = (level: 'debug' | 'warn' | 'error') => (msg: string, err?: unknown) => {
      lines.push({ level, msg, ...(err !== undefined && level === 'error' ? { err } : {}) });
      if (/OTLP\/HTTP/.test(msg)) seen();
    };
    let keyAsked!: () => void;
    const asked = new Promise<void>((r) => (keyAsked = r));
    ingest = await startIngest({
      bus,
      resolveKey: async (k) => {
        keyAsked();
        return k === 'key-shop' ? 'shop' : undefined;
      },
      otlpPort: 0,
      grpcPort: 0,
      otlpHttpPort: 0,
      logger: { debug: record('debug'), warn: record('warn'), error: (msg, err) => record('error')(msg, err) },
    });
    // Headers announcing 10,000 bytes and a valid key, then 100 bytes of the body.
    const socket = net.connect(ingest.otlpHttpPort!, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write(
      'POST /v1/traces HTTP/1.1\r\nHost: ingest\r\ncontent-type: application/json\r\ncontent-length: 10000\r\nx-api-key: key-shop\r\n\r\n' +
        '{"resourceSpans":[{"scopeSpans":[{"spans":[' + ' '.repeat(57),
    );
    // The key is checked from the headers: the request is in hand; the client gives up.
    await within(asked, 10_000, 'the key looked up');
    socket.destroy();
    // Ingest says what became of the request once it sees it gone.
    await within(lineLogged, 10_000, 'a log line about the aborted request');
    expect(lines.filter((l) => l.level !== 'debug')).toEqual([]);
    expect(lines).toEqual([{ level: 'debug', msg: expect.stringMatching(/^ingest: OTLP\/HTTP: the client went away before its request's body was all sent \(aborted\); nothing taken$/) }]);
    expect(ingest.metrics.exports.otlp).toBe(0);
  });
});
