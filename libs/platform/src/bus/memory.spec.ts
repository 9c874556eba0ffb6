import { jsonTopic } from '../contract/bus.contract.test';
import { MemoryBus } from './memory';

const topic = jsonTopic<number>('t');

describe('MemoryBus', () => {
  it('without waiting for the turn (replay), a burst published in one go is still one batch, in order', async () => {
    const bus = new MemoryBus({ partitions: 1, gatherTurn: false });
    const batches: number[][] = [];
    await bus.subscribe<number>(topic, { group: 'g' }, async (b) => void batches.push(b.records.map((r) => r.value)));
    void bus.publish(topic, [{ key: 'a', value: 1 }]);
    void bus.publish(topic, [{ key: 'b', value: 2 }]);
    await bus.idle();
    await bus.publish(topic, [{ key: 'a', value: 3 }]);
    await bus.idle();
    expect(batches).toEqual([[1, 2], [3]]);
    await bus.close();
  });

  it('a group with more members than partitions gets every record once, and goes idle', async () => {
    const bus = new MemoryBus({ partitions: 1, gatherTurn: false });
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) await bus.subscribe<number>(topic, { group: 'g' }, async (b) => void seen.push(...b.records.map((r) => r.value)));
    for (let v = 0; v < 50; v++) {
      await bus.publish(topic, [{ key: `k${v % 3}`, value: v }]);
      await bus.idle();
    }
    expect(seen).toEqual(Array.from({ length: 50 }, (_, v) => v));
    expect(bus.backlog('t')).toBe(0);
    await bus.close();
  });
});
