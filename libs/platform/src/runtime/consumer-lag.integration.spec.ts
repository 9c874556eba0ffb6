import { Kafka, logLevel } from 'kafkajs';
import type { Bus, Logger, Topic } from '@neatroots/ports';
import { loadConfig } from '../config';
import { createMetrics, type Metrics } from '../ops';
import { requireService, uniqueName } from '../testing/services';
import { jsonTopic, type Rec } from '../contract/bus.contract.test';
import { RetryLaterError } from '../bus/set-aside';
import { distributedPlatform } from './platforms';

/**
 * neatroots_consumer_lag in the distributed deployment: what a consumer group has not committed
 * yet, over all of the topic's partitions, as the broker has it, whether the group's batches get
 * through or not. (It was the lag one partition's batch was fetched with, set only after a batch
 * committed: a sixth of the real lag on six partitions, and nothing at all, or a stale figure,
 * for a group whose handler failed or hung.)
 */
const SUITE = 'distributed consumer lag';
const kafka = requireService('kafka', SUITE);
const quiet: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => quiet };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

(kafka ? describe : describe.skip)(SUITE, () => {
  const admin = new Kafka({ brokers: kafka ?? ['127.0.0.1:9'], logLevel: logLevel.NOTHING }).admin();
  const topics: string[] = [];
  const groups: string[] = [];
  const closing: (() => Promise<void>)[] = [];
  beforeAll(() => admin.connect());
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((c) => c()));
  }, 60_000);
  afterAll(async () => {
    await admin.deleteGroups(groups).catch(() => undefined);
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }, 60_000);

  /** A distributed platform on six partitions, its lag read every 250 ms. */
  function platform(): { metrics: Metrics; bus: Bus; prefix: string } {
    const prefix = uniqueName('lag');
    const config = loadConfig({ NEATROOTS_KAFKA_BROKERS: kafka!.join(','), NEATROOTS_TOPIC_PREFIX: prefix, NEATROOTS_PARTITIONS: '6' });
    const metrics = createMetrics('t');
    const p = distributedPlatform({ config, log: quiet, metrics, name: 'lag', consumerLagIntervalMs: 250 });
    closing.push(() => p.close());
    return { metrics, bus: p.bus(), prefix };
  }

  /** The group's lag as the broker has it, partition by partition (a partition it never committed on: from 0). */
  async function brokerLag(topic: string, group: string): Promise<number[]> {
    const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const ends = await admin.fetchTopicOffsets(topic);
    const at = new Map(committed.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))]));
    return ends.sort((a, b) => a.partition - b.partition).map((e) => Number(e.high) - (at.get(e.partition) ?? 0));
  }

  async function gauge(metrics: Metrics, topic: string, group: string): Promise<number | undefined> {
    return (await metrics.consumerLag.get()).values.find((v) => v.labels.topic === topic && v.labels.group === group)?.value;
  }

  /** Waits (bounded) until the gauge reads what the broker says, and more than `above`; both figures. */
  async function untilGaugeIsBrokers(metrics: Metrics, topic: string, group: string, above: number): Promise<{ gauge: number; partitions: number[] }> {
    let last = '';
    for (const end = Date.now() + 30_000; Date.now() < end; await sleep(100)) {
      const g = await gauge(metrics, topic, group);
      const partitions = await brokerLag(topic, group);
      const sum = partitions.reduce((a, b) => a + b, 0);
      last = `gauge ${g}, the broker's lag ${sum} [${partitions.join(', ')}]`;
      if (g === sum && g > above) return { gauge: g, partitions };
    }
    throw new Error(`the gauge never read the broker's lag (above ${above}) in 30 s: ${last}`);
  }

  /** Publishes `n` times 100 records of 97 runs: with packs, about 100 Kafka messages each time, on all six partitions. */
  async function backlog(bus: Bus, topic: Topic<Rec>, n: number, from = 0): Promise<void> {
    for (let i = from; i < from + n; i++) {
      await bus.publish(
        topic,
        Array.from({ length: 100 }, (_, k) => ({ key: `run-${(i * 100 + k) % 97}`, value: { k: `run-${k}`, i } })),
      );
    }
  }

  it("reads the broker's lag of the group over all six partitions while its handler is stuck on its first batches", async () => {
    const { metrics, bus, prefix } = platform();
    const topic = jsonTopic<Rec>(uniqueName('it_lag_blocked'));
    topics.push(topic.name);
    const group = `${prefix}.blocked`;
    groups.push(group);
    await backlog(bus, topic, 20);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    closing.unshift(async () => release()); // before the platform closes: its batches end
    let handed = 0;
    await bus.subscribe(topic, { group: 'blocked' }, async () => {
      handed++;
      await released;
    });
    const { gauge: lag, partitions } = await untilGaugeIsBrokers(metrics, topic.name, group, 0);
    expect(handed).toBeGreaterThan(0);
    // Nothing was committed: all of the backlog, on every partition, not one partition's share.
    expect(partitions.filter((n) => n > 0).length).toBe(6);
    expect(lag).toBe((await admin.fetchTopicOffsets(topic.name)).reduce((n, e) => n + Number(e.high), 0));
  }, 60_000);

  it("counts a group's consumer restarts from 0 as it subscribes, so the first restart is an increase an alert sees", async () => {
    const { metrics, bus, prefix } = platform();
    const topic = jsonTopic<Rec>(uniqueName('it_lag_restarts'));
    topics.push(topic.name);
    const group = `${prefix}.restarts`;
    groups.push(group);
    await bus.subscribe(topic, { group: 'restarts' }, async () => undefined);
    const restarts = (await metrics.consumerRestarts.get()).values.filter((v) => v.labels.topic === topic.name);
    expect(restarts.map((v) => ({ labels: v.labels, value: v.value }))).toEqual([{ labels: { topic: topic.name, group }, value: 0 }]);
    expect(await metrics.registry.metrics()).toContain(`neatroots_bus_consumer_restarts_total{topic="${topic.name}",group="${group}",service="t"} 0`);
  }, 60_000);

  it('grows past 0 while the group cannot handle anything (a dependency down) and records keep coming', async () => {
    const { metrics, bus, prefix } = platform();
    const topic = jsonTopic<Rec>(uniqueName('it_lag_failing'));
    topics.push(topic.name);
    const group = `${prefix}.failing`;
    groups.push(group);
    let tries = 0;
    await bus.subscribe(topic, { group: 'failing' }, async () => {
      tries++;
      throw new RetryLaterError('connect ECONNREFUSED 127.0.0.1:6379');
    });
    await backlog(bus, topic, 2);
    const first = await untilGaugeIsBrokers(metrics, topic.name, group, 0);
    expect(tries).toBeGreaterThan(0);
    await backlog(bus, topic, 3, 2);
    const later = await untilGaugeIsBrokers(metrics, topic.name, group, first.gauge);
    expect(later.gauge).toBeGreaterThan(first.gauge);
  }, 60_000);
});
