import { execFileSync } from 'node:child_process';

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
});
