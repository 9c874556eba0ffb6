import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The swap of kafkajs's helpers happens in Node's module cache, which jest's own module registry
 * does not use: checked in a plain node process loading the built package as the services do.
 */
describe("kafkajs's producer helpers in a service's process", () => {
  it('are ours once @neatroots/platform is loaded, before anything of kafkajs', () => {
    const script = `
      const platform = require('@neatroots/platform');
      const parts = require('@neatroots/platform/dist/bus/kafkajs-parts');
      const crc = require('kafkajs/src/protocol/recordBatch/crc32C');
      const group = require('kafkajs/src/producer/groupMessagesPerPartition');
      const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0');
      process.stdout.write(JSON.stringify({
        bus: typeof platform.KafkaBus,
        installed: parts.installed,
        crc: crc === parts.crc32c,
        group: group === parts.groupByPartition,
        batch: typeof RecordBatch,
      }));`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
    expect(out).toEqual({ bus: 'function', installed: { crc32C: true, groupMessagesPerPartition: true }, crc: true, group: true, batch: 'function' });
  });

  it("are kafkajs's own in a kafkajs release the copies were not checked against", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kafkajs-next-'));
    try {
      // kafkajs's manifest as a later release would have it, beside kafkajs's own files
      const manifest = path.join(dir, 'package.json');
      writeFileSync(manifest, JSON.stringify({ name: 'kafkajs', version: '2.3.0' }));
      symlinkSync(path.join(path.dirname(require.resolve('kafkajs/package.json')), 'src'), path.join(dir, 'src'));
      const script = `
        const Module = require('node:module');
        const resolve = Module._resolveFilename;
        Module._resolveFilename = function (request, ...rest) {
          return request === 'kafkajs/package.json' ? ${JSON.stringify(manifest)} : resolve.call(this, request, ...rest);
        };
        const parts = require('@neatroots/platform/dist/bus/kafkajs-parts');
        const crc = require('kafkajs/src/protocol/recordBatch/crc32C');
        process.stdout.write(JSON.stringify({ installed: parts.installed, crc: crc === parts.crc32c }));`;
      const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
      expect(out).toEqual({ installed: { crc32C: false, groupMessagesPerPartition: false }, crc: false });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
