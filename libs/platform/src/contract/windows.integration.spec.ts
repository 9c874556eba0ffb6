import type { WindowStore } from '@neatroots/ports';
import { Redis } from 'ioredis';
import { MemoryWindowStore } from '../windows/memory';
import { openRedisWindowStore } from '../windows/redis';
import { serviceOrSkip } from '../testing/services';
import { windowsContract, type TestWindow } from './windows.contract.test';

// Memory: clients of one namespace share one store; closing a client does not clear it.
const memory = new Map<string, MemoryWindowStore<TestWindow>>();
windowsContract('MemoryWindowStore', {
  open: async (ns) => {
    let store = memory.get(ns);
    if (!store) memory.set(ns, (store = new MemoryWindowStore<TestWindow>()));
    const shared: WindowStore<TestWindow> = {
      load: (k) => store.load(k),
      save: (e) => store.save(e),
      delete: (k) => store.delete(k),
      wakeAt: (e) => store.wakeAt(e),
      setWakes: (e) => store.setWakes(e),
      takeDue: (n, l, lease) => store.takeDue(n, l, lease),
      close: async () => undefined,
    };
    return shared;
  },
});

const redis = serviceOrSkip('redis', 'WindowStore contract on Redis');
if (redis) {
  windowsContract('RedisWindowStore', {
    // one connection per client, as two rule-engine replicas would have
    open: (ns) => openRedisWindowStore<TestWindow>({ url: redis.url, prefix: ns }),
    cleanup: async (namespaces) => {
      const r = new Redis(redis.url);
      try {
        for (const ns of namespaces) {
          const keys = await r.keys(`${ns}:*`);
          if (keys.length) await r.del(...keys);
        }
      } finally {
        r.disconnect();
      }
    },
  });
} else {
  describe.skip('WindowStore contract: RedisWindowStore (no Redis)', () => it('needs Redis', () => undefined));
}
