import { gunzipSync, gzipSync } from 'node:zlib';
import { AssignerProtocol, CompressionCodecs, CompressionTypes, ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import { makeTopics } from '@neatroots/messages';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { DEAD_LETTER_TRAVEL_CHARS, deadLetterTopic, type BusRecord, type DeadLetter, type Subscription } from '@neatroots/ports';
import { TEST_KAFKA_BUS } from '../testing/kafka-topics';
import { serviceOrSkip, uniqueName } from '../testing/services';
import { jsonTopic, waitUntil, type Rec } from '../contract/bus.contract.test';
import { DEFAULT_MAX_RECORD_BYTES, GZIP_LEVEL, KafkaBus, RecordTooLargeError, type KafkaBusOptions } from './kafka';
import { RetryLaterError } from './set-aside';

const kafka = serviceOrSkip('kafka', 'KafkaBus');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

(kafka ? describe : describe.skip)('KafkaBus', () => {
  const brokers = kafka?.brokers ?? [];
  const base = uniqueName('it_kafka');
  const topics: string[] = [];
  const groups: string[] = [];
  const buses: KafkaBus[] = [];
  const admin = new Kafka({ brokers: brokers.length ? brokers : ['127.0.0.1:9'], logLevel: logLevel.NOTHING }).admin();

  const topicName = (n: string) => {
    const t = `${base}.${n}`;
    topics.push(t);
    return t;
  };
  const group = (n: string) => {
    const g = `${base}.${n}`;
    groups.push(g);
    return g;
  };
  const newBus = (opts: Partial<KafkaBusOptions> = {}) => {
    const b = new KafkaBus({ brokers, clientId: 'it', ...TEST_KAFKA_BUS, ...opts });
    buses.push(b);
    return b;
  };
  const recs = (keys: number, perKey: number, from = 0): BusRecord<Rec>[] => {
    const out: BusRecord<Rec>[] = [];
    for (let i = from; i < from + perKey; i++) for (let k = 0; k < keys; k++) out.push({ key: `r${k}`, value: { k: `r${k}`, i } });
    return out;
  };

  beforeAll(() => admin.connect());
  afterAll(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await admin.deleteGroups(groups).catch(() => undefined);
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }, 60_000);

  it('creates its topics with the configured partition count, and uses an existing topic as it is', async () => {
    const t = jsonTopic<Rec>(topicName('created'));
    await newBus({ partitions: 3 }).publish(t, recs(1, 1));
    const md = await admin.fetchTopicMetadata({ topics: [t.name] });
    expect(md.topics[0].partitions).toHaveLength(3);
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      await newBus({ partitions: 5 }).publish(t, recs(1, 1));
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('exists with 3 partitions (configured: 5)'));
    } finally {
      warn.mockRestore();
    }
    expect((await admin.fetchTopicMetadata({ topics: [t.name] })).topics[0].partitions).toHaveLength(3);
  }, 30_000);

  it('batches publish calls by size and by time', async () => {
    const t = jsonTopic<Rec>(topicName('batching'));
    // one Kafka record per record here (packs are below)
    const bus = newBus({ maxBatchRecords: 100, lingerMs: 300, pack: false });
    await bus.ensureTopic(t.name);
    // by time: a lone record waits for the linger
    let t0 = Date.now();
    await bus.publish(t, recs(1, 1));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(280);
    // by size: a full batch goes at once, long before its linger (10 s here, so a broker slow
    // to acknowledge on a loaded machine is told apart from the wait)
    const full = newBus({ maxBatchRecords: 100, lingerMs: 10_000, pack: false });
    t0 = Date.now();
    await full.publish(t, recs(100, 1));
    expect(Date.now() - t0).toBeLessThan(5_000);
    // a large publish is cut into sends of at most maxBatchRecords
    let sends = bus.stats.sends;
    await bus.publish(t, recs(100, 10));
    expect(bus.stats.sends - sends).toBe(10);
    // many small calls share sends
    sends = bus.stats.sends;
    await Promise.all(recs(300, 1).map((r) => bus.publish(t, [r])));
    expect(bus.stats.sends - sends).toBeLessThanOrEqual(4);
    expect(bus.stats.published).toBe(1 + 1000 + 300);
    expect(full.stats.published).toBe(100);
  }, 30_000);

  it('rejects publishers when no broker answers, so ingest can say UNAVAILABLE', async () => {
    const bus = newBus({ brokers: ['127.0.0.1:1'], retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 }, connectionTimeout: 300, logLevel: 'nothing' });
    const t0 = Date.now();
    await expect(bus.publish(jsonTopic<Rec>('never-created'), recs(1, 1))).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 30_000);

  it('carries the protobuf topics intact, keyed by run_id', async () => {
    const wire = makeTopics(`${base}.pb`);
    topics.push(wire.events.name);
    const bus = newBus();
    const envs: Envelope[] = [
      { project: 'p', received_ms: 1_700_000_000_001, item: normalizeItem({ run_id: 'run-1', span_id: 's1', type: 'tool', name: 'search', tool: 'search', input: { q: 'a' }, start_ms: 1_700_000_000_000 }) },
      { project: 'p', received_ms: 1_700_000_000_002, item: normalizeItem({ event: 'run_end', run_id: 'run-1', status: 'ok', final_output: { answer: 42 } }) },
      { project: 'p', received_ms: 1_700_000_000_003, item: normalizeItem({ run_id: 'run-2', span_id: 's1', type: 'llm', name: 'chat', usage: { input_tokens: 3 } }) },
    ];
    const got: { key: string; value: Envelope; partition: number }[] = [];
    const sub = await bus.subscribe(wire.events, { group: group('pb') }, async (b) => {
      for (const r of b.records) got.push({ ...r, partition: b.partition });
    });
    await bus.publish(wire.events, envs.map((e) => ({ key: e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id, value: e })));
    await waitUntil(() => got.length >= 3, 20_000, () => `${got.length} of 3`);
    await sub.close();
    const run1 = got.filter((g) => g.key === 'run-1');
    expect(run1.map((g) => g.value)).toEqual(envs.slice(0, 2).map((e) => wire.events.decode(wire.events.encode(e))));
    expect(run1[0].partition).toBe(run1[1].partition);
    expect(got.find((g) => g.key === 'run-2')?.value).toEqual(wire.events.decode(wire.events.encode(envs[2])));
  }, 30_000);

  it('compresses with gzip at its fast level when asked, and reads it back in order', async () => {
    // kafkajs's own gzip codec uses zlib's default level (6), 2.5 times the CPU for this data.
    const codec = CompressionCodecs[CompressionTypes.GZIP]();
    const plain = Buffer.from(JSON.stringify(recs(20, 20)));
    const packed = await codec.compress({ buffer: plain } as never);
    expect(Buffer.compare(packed, gzipSync(plain, { level: GZIP_LEVEL }))).toBe(0);
    expect(gunzipSync(packed).equals(plain)).toBe(true);

    const t = jsonTopic<Rec>(topicName('gzip'));
    const bus = newBus({ compression: 'gzip', compressMinBytes: 0 });
    const got: Rec[] = [];
    const sub = await bus.subscribe(t, { group: group('gzip') }, async (b) => {
      for (const r of b.records) got.push(r.value);
    });
    const sent = recs(3, 50);
    await bus.publish(t, sent);
    await waitUntil(() => got.length >= sent.length, 20_000, () => `${got.length} of ${sent.length}`);
    await sub.close();
    for (const k of ['r0', 'r1', 'r2']) expect(got.filter((r) => r.k === k)).toEqual(sent.map((r) => r.value).filter((r) => r.k === k));
  }, 30_000);

  it('compresses only a send of at least compressMinBytes: a small one goes as it is, and both are read back', async () => {
    // kafkajs looks its codec up for every record batch it writes or reads: counted here.
    const gzipCodec = CompressionCodecs[CompressionTypes.GZIP];
    const compressed: number[] = [];
    let decompressed = 0;
    CompressionCodecs[CompressionTypes.GZIP] = () => {
      const c = gzipCodec();
      return {
        compress: (e: { buffer: Buffer }) => (compressed.push(e.buffer.length), c.compress(e as never)),
        decompress: (b: Buffer) => (decompressed++, c.decompress(b)),
      };
    };
    try {
      const t = jsonTopic<Rec>(topicName('gzip-min'));
      const bus = newBus({ compression: 'gzip', compressMinBytes: 4096, pack: false });
      const got: Rec[] = [];
      const sub = await bus.subscribe(t, { group: group('gzip-min') }, async (b) => {
        for (const r of b.records) got.push(r.value);
      });
      // One record of a few bytes, then 300 (about 6 KB of keys and values) in one send.
      const small = recs(1, 1);
      await bus.publish(t, small);
      const large = recs(1, 300, 1);
      await bus.publish(t, large);
      await waitUntil(() => got.length >= 301, 20_000, () => `${got.length} of 301`);
      await sub.close();
      expect(got).toEqual([...small, ...large].map((r) => r.value));
      expect(bus.stats.sends).toBe(2);
      expect(bus.stats.compressedSends).toBe(1);
      // The large send alone went through gzip, and the consumer unzipped only what it wrote.
      expect(compressed.length).toBe(1);
      expect(compressed[0]).toBeGreaterThan(4096);
      expect(decompressed).toBeGreaterThanOrEqual(1);
    } finally {
      CompressionCodecs[CompressionTypes.GZIP] = gzipCodec;
    }
  }, 30_000);

  it('keeps a consumer in its group through a batch longer than the session timeout (heartbeats)', async () => {
    const t = jsonTopic<Rec>(topicName('long'));
    const bus = newBus({ heartbeatInterval: 500 });
    const calls: number[] = [];
    const sub = await bus.subscribe(t, { group: group('long') }, async (b) => {
      for (const r of b.records) calls.push(r.value.i);
      if (b.records.some((r) => r.value.i === 0)) await sleep(8_000); // session timeout: 6 s
    });
    await bus.publish(t, recs(1, 1));
    await waitUntil(() => calls.includes(0), 20_000, () => 'first record not handled');
    await bus.publish(t, recs(1, 1, 1));
    await waitUntil(() => calls.includes(1), 30_000, () => `second record not handled: ${JSON.stringify(calls)}`);
    await sub.close();
    // evicted mid-batch, the commit would have failed and the batch come back
    expect(calls).toEqual([0, 1]);
  }, 60_000);

  it('loses nothing while consumers join and leave mid-stream, and commits everything it handled', async () => {
    const t = jsonTopic<Rec>(topicName('rebalance'));
    const g = group('rebalance');
    const producer = newBus({ lingerMs: 2 });
    await producer.ensureTopic(t.name);
    const seen = new Set<string>();
    let deliveries = 0;
    const handler = async (b: { records: BusRecord<Rec>[] }) => {
      await sleep(5);
      for (const r of b.records) seen.add(`${r.key}:${r.value.i}`);
      deliveries += b.records.length;
    };
    const subs: Subscription[] = [];
    subs.push(await newBus().subscribe(t, { group: g }, handler));
    const rounds = 40;
    let closedFirst: Promise<void> | undefined;
    for (let round = 0; round < rounds; round++) {
      await producer.publish(t, recs(50, 1, round));
      await sleep(25);
      if (round === 10) subs.push(await newBus().subscribe(t, { group: g }, handler)); // a replica joins
      if (round === 25) closedFirst = subs[0].close(); // the first one leaves
    }
    await closedFirst;
    await waitUntil(() => seen.size >= rounds * 50, 30_000, () => `${seen.size} of ${rounds * 50} seen`);
    await subs[1].close();
    expect(seen.size).toBe(rounds * 50);
    expect(deliveries).toBeGreaterThanOrEqual(rounds * 50); // at least once: a few may come twice
    const committed = await admin.fetchOffsets({ groupId: g, topics: [t.name] });
    const ends = await admin.fetchTopicOffsets(t.name);
    const byPartition = new Map(committed[0].partitions.map((p) => [p.partition, p.offset]));
    for (const e of ends) expect({ partition: e.partition, offset: byPartition.get(e.partition) }).toEqual({ partition: e.partition, offset: e.high });
  }, 90_000);

  it('starts again a consumer kafkajs stopped for good (an error it does not retry), and then reads what was published', async () => {
    // A member of the group that speaks another partition-assignment protocol: the broker
    // refuses the bus's consumer with INCONSISTENT_GROUP_PROTOCOL, an error kafkajs does not
    // retry, so kafkajs stops that consumer for good (as it does for "failed to find group
    // coordinator" while a restarted broker loads its groups). Once the other member leaves,
    // the bus must be reading again.
    const t = jsonTopic<Rec>(topicName('restart'));
    const g = group('restart');
    const bus = newBus({ retryDelayMs: 200 });
    await bus.ensureTopic(t.name);
    const other = new Kafka({ brokers, clientId: 'it-other', logLevel: logLevel.NOTHING }).consumer({
      groupId: g,
      sessionTimeout: 6_000,
      heartbeatInterval: 300,
      partitionAssigners: [
        () => ({
          name: 'OtherProtocol',
          version: 0,
          // Whatever it assigns is its own business: nothing here reads the topic.
          assign: async ({ members }) =>
            members.map((m) => ({ memberId: m.memberId, memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 0, assignment: {}, userData: Buffer.alloc(0) }) })),
          protocol: ({ topics: ts }) => ({ name: 'OtherProtocol', metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics: ts, userData: Buffer.alloc(0) }) }),
        }),
      ],
    });
    await other.connect();
    await other.subscribe({ topics: [t.name] });
    let otherJoined = false;
    other.on(other.events.GROUP_JOIN, () => (otherJoined = true));
    await other.run({ eachBatch: async () => undefined });
    await waitUntil(() => otherJoined, 20_000, () => 'the other member did not join');

    const errors: string[] = [];
    const restarted: { topic: string; group: string }[] = [];
    const logged = newBus({ retryDelayMs: 200, onError: (e) => errors.push((e as Error).message), onConsumerRestart: (w) => restarted.push(w) });
    const got: number[] = [];
    const sub = await logged.subscribe(t, { group: g }, async (b) => {
      for (const r of b.records) got.push(r.value.i);
    });
    try {
      await waitUntil(() => errors.some((m) => m.includes('stopped by kafkajs')), 20_000, () => `no crash seen: ${JSON.stringify(errors)}`);
      await bus.publish(t, recs(1, 3));
      await other.disconnect();
      await waitUntil(() => got.length >= 3, 40_000, () => `read ${JSON.stringify(got)} after the other member left; errors: ${JSON.stringify(errors.slice(-3))}`);
      expect(got).toEqual([0, 1, 2]);
      expect(logged.stats.consumerRestarts).toBeGreaterThanOrEqual(1);
      expect(restarted).toHaveLength(logged.stats.consumerRestarts);
      expect(restarted[0]).toEqual({ topic: t.name, group: g });
    } finally {
      await sub.close();
      await other.disconnect().catch(() => undefined);
    }
  }, 90_000);

  it('commits what it handled once commitIntervalMs has passed (at the end of a later batch), and all of it when it closes', async () => {
    const t = jsonTopic<Rec>(topicName('commit-interval'));
    const g = group('commit-interval');
    const producer = newBus({ lingerMs: 1 });
    await producer.ensureTopic(t.name);
    const offsets = async () => {
      const [c] = await admin.fetchOffsets({ groupId: g, topics: [t.name] });
      const ends = await admin.fetchTopicOffsets(t.name);
      const at = new Map(c.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))])); // -1: none
      return {
        committed: ends.reduce((n, e) => n + (at.get(e.partition) ?? 0), 0),
        written: ends.reduce((n, e) => n + Number(e.high), 0),
      };
    };
    let got = 0;
    const sub = await newBus({ commitIntervalMs: 2_000 }).subscribe(t, { group: g }, async (b) => {
      got += b.records.length;
    });
    const started = Date.now();
    await producer.publish(t, recs(4, 5)); // four keys: a pack each, on up to four partitions
    await waitUntil(() => got >= 20, 20_000, () => `${got} of 20`);
    // Handled, and within the interval (timed from the consumer's start): nothing committed yet.
    const early = await offsets();
    if (Date.now() - started < 1_800) expect(early.committed).toBe(0);
    expect(early.written).toBe(4);
    await sleep(Math.max(0, started + 2_200 - Date.now()));
    // A batch after the interval commits every partition handled since, not only its own.
    await producer.publish(t, recs(1, 1, 5));
    await waitUntil(() => got >= 21, 20_000, () => `${got} of 21`);
    let now = await offsets();
    for (const end = Date.now() + 5_000; now.committed < now.written && Date.now() < end; now = await offsets()) await sleep(50);
    expect(now).toEqual({ committed: 5, written: 5 });
    // Handled just after a commit, then the subscription closes: close commits it.
    await producer.publish(t, recs(3, 1, 6));
    await waitUntil(() => got >= 24, 20_000, () => `${got} of 24`);
    await sub.close();
    expect(await offsets()).toEqual({ committed: 8, written: 8 });
    // So a consumer of the group that comes next reads none of it again.
    let again = 0;
    const next = await newBus().subscribe(t, { group: g }, async (b) => {
      again += b.records.length;
    });
    await producer.publish(t, recs(1, 1, 9));
    await waitUntil(() => again >= 1, 20_000, () => 'the next record not handled');
    await sleep(300);
    await next.close();
    expect(again).toBe(1);
  }, 60_000);

  it('sets aside a record it cannot decode (its bytes kept) and hands on the others', async () => {
    const prefix = uniqueName('it_dl');
    topics.push(`${prefix}.dead-letters`);
    const bus = newBus({ deadLetterPrefix: prefix, onError: () => undefined });
    const name = topicName('undecodable');
    // a reader that cannot read odd numbers (as a newer producer's records would be)
    const strict = { ...jsonTopic<Rec>(name), decode: (b: Uint8Array) => {
      const v = JSON.parse(new TextDecoder().decode(b)) as Rec;
      if (v.i % 2) throw new Error(`cannot read record ${v.i}`);
      return v;
    } };
    const seen: number[] = [];
    const letters: DeadLetter[] = [];
    await bus.subscribe(deadLetterTopic(prefix), { group: group('dl') }, async (b) => void letters.push(...b.records.map((r) => r.value)));
    await bus.subscribe(strict, { group: group('strict') }, async (b) => void seen.push(...b.records.map((r) => r.value.i)));
    // a pack of a run's 4 records, and 4 records of another run written one by one (as before packs)
    await bus.publish(jsonTopic<Rec>(name), recs(1, 4));
    expect(bus.stats.messages).toBe(1);
    await newBus({ pack: false }).publish(jsonTopic<Rec>(name), recs(2, 4).filter((r) => r.key === 'r1'));
    await waitUntil(() => seen.length >= 4 && letters.length >= 4, 20_000, () => `seen ${seen}, ${letters.length} dead letters`);
    expect(seen).toEqual([0, 2, 0, 2]);
    expect(letters.map((l) => `${l.run_id}: ${l.reason}`)).toEqual([
      'r0: cannot decode: cannot read record 1',
      'r0: cannot decode: cannot read record 3',
      'r1: cannot decode: cannot read record 1',
      'r1: cannot decode: cannot read record 3',
    ]);
    expect(letters[0].item_id).toMatch(/^offset \d+ value 1$/);
    const payload = letters[0].payload as { base64: string };
    expect(JSON.parse(Buffer.from(payload.base64, 'base64').toString('utf8'))).toEqual({ k: 'r0', i: 1 });
    expect(letters[0]).toMatchObject({ kind: 'undecodable', source: `bus:${name}/${groups[groups.length - 1]}`, run_id: 'r0' });
  }, 60_000);

  it('sets aside a record as large as its largest (its letter cut to travel) and hands on the next, never stuck behind it', async () => {
    // The letter of an undecodable record carries its bytes in base64, a third larger than the
    // record: whole, it would be refused as too large and the partition read again forever.
    const prefix = uniqueName('it_dl_big');
    topics.push(`${prefix}.dead-letters`);
    const maxRecordBytes = 1536 * 1024;
    const bus = newBus({ deadLetterPrefix: prefix, onError: () => undefined, maxRecordBytes, pack: false });
    const name = topicName('undecodable-big');
    const strict = { ...jsonTopic<Rec & { pad?: string }>(name), decode: (b: Uint8Array) => {
      const v = JSON.parse(new TextDecoder().decode(b)) as Rec & { pad?: string };
      if (v.pad) throw new Error(`cannot read record ${v.i}`);
      return v;
    } };
    const seen: number[] = [];
    const letters: DeadLetter[] = [];
    await bus.subscribe(deadLetterTopic(prefix), { group: group('dl-big') }, async (b) => void letters.push(...b.records.map((r) => r.value)));
    await bus.subscribe(strict, { group: group('strict-big') }, async (b) => void seen.push(...b.records.map((r) => r.value.i)));
    await bus.publish(jsonTopic<Rec & { pad?: string }>(name), [{ key: 'r0', value: { k: 'r0', i: 1, pad: 'x'.repeat(1400 * 1024) } }]);
    await bus.publish(jsonTopic<Rec>(name), [{ key: 'r0', value: { k: 'r0', i: 2 } }]);
    await waitUntil(() => seen.length >= 1 && letters.length >= 1, 30_000, () => `seen ${seen}, ${letters.length} dead letters`);
    expect(seen).toEqual([2]);
    expect(letters[0]).toMatchObject({ kind: 'undecodable', run_id: 'r0', reason: 'cannot decode: cannot read record 1', payload: null });
    expect(letters[0].payload_cut!.length).toBe(DEAD_LETTER_TRAVEL_CHARS);
    expect(letters[0].payload_cut!.startsWith('{"partition":')).toBe(true);
  }, 60_000);

  describe('a backlog is handed over in parts of at most maxHandlerBytes (memory bounded by the settings, not the backlog)', () => {
    type Padded = { k: string; i: number; pad: string };
    // about 600 bytes a record, the size of a span on the bus: 6,000 of them, 3.6 MB decoded,
    // gzip makes them a few hundred KB as stored, which one fetch of one partition brought whole
    const PAD = 'x'.repeat(560);
    const backlog = async (name: string) => {
      const t = jsonTopic<Padded>(topicName(name));
      const producer = newBus({ partitions: 1, compression: 'gzip', compressMinBytes: 0, maxBatchBytes: 16 * 1024 });
      await producer.ensureTopic(t.name);
      for (let from = 0; from < 6_000; from += 1_000) {
        await producer.publish(t, Array.from({ length: 1_000 }, (_, j) => ({ key: `r${(from + j) % 4}`, value: { k: `r${(from + j) % 4}`, i: from + j, pad: PAD } })));
      }
      return t;
    };
    const bytesOf = (records: readonly BusRecord<Padded>[]) => records.reduce((n, r) => n + JSON.stringify(r.value).length, 0);
    const BOUND = 64 * 1024;
    // a part holds whole packs (16 KiB each here): it passes the bound by less than one
    const PACK = 16 * 1024;

    it('hands every record over, in order, none of the parts over the bound, and commits them all', async () => {
      const t = await backlog('parts');
      const g = group('parts');
      const sizes: number[] = [];
      const got: Padded[] = [];
      const sub = await newBus({ maxHandlerBytes: BOUND }).subscribe(t, { group: g }, async (b) => {
        sizes.push(bytesOf(b.records));
        for (const r of b.records) got.push(r.value);
      });
      await waitUntil(() => got.length >= 6_000, 60_000, () => `${got.length} of 6000`);
      await sub.close();
      // each key's records in order (a key's records of one publish travel in its packs)
      for (let k = 0; k < 4; k++) {
        expect(got.filter((v) => v.k === `r${k}`).map((v) => v.i)).toEqual(Array.from({ length: 1_500 }, (_, j) => 4 * j + k));
      }
      // parts, not the fetch whole (3.6 MB decoded), and none past the bound by a pack or more
      const total = sizes.reduce((a, b) => a + b, 0);
      expect(sizes.length).toBeGreaterThanOrEqual(Math.floor(total / (BOUND + PACK)));
      expect(Math.max(...sizes)).toBeLessThan(BOUND + PACK);
      const [c] = await admin.fetchOffsets({ groupId: g, topics: [t.name] });
      const [end] = await admin.fetchTopicOffsets(t.name);
      expect(c.partitions[0].offset).toBe(end.high);
    }, 120_000);

    it('reads a part that failed again from its own first record: the parts before it are not handed over again', async () => {
      const t = await backlog('part-again');
      const firsts: number[] = [];
      let failed = false;
      let got = 0;
      const sub = await newBus({ maxHandlerBytes: BOUND }).subscribe(t, { group: group('part-again') }, async (b) => {
        firsts.push(b.records[0].value.i);
        // the third part fails once
        if (firsts.length === 3 && !failed) {
          failed = true;
          throw new Error('a dependency is down');
        }
        got += b.records.length;
      });
      const quiet = jest.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        await waitUntil(() => got >= 6_000, 60_000, () => `${got} of 6000`);
      } finally {
        await sub.close();
        quiet.mockRestore();
      }
      // the failed part came again (from its own first record), and nothing else twice
      expect(firsts[3]).toBe(firsts[2]);
      expect(got).toBe(6_000);
    }, 120_000);
  });

  describe('packs: the records of one key in one publish() as one Kafka record', () => {
    /** Each key's values in the order a group was handed them, and the batches' sizes. */
    const collect = async (bus: KafkaBus, t: ReturnType<typeof jsonTopic<Rec>>, g: string, handle?: (b: { records: BusRecord<Rec>[] }) => Promise<void>) => {
      const byKey = new Map<string, number[]>();
      let n = 0;
      const sub = await bus.subscribe(t, { group: g }, async (b) => {
        if (handle) await handle(b);
        for (const r of b.records) {
          byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.value.i]);
          n++;
        }
      });
      return { byKey, sub, count: () => n };
    };
    const inOrder = (keys: number, perKey: number) => new Map(Array.from({ length: keys }, (_, k) => [`r${k}`, Array.from({ length: perKey }, (_, i) => i)]));

    it('sends a pack per key and publish within maxBatchBytes, and hands each key over in order across packs', async () => {
      const t = jsonTopic<Rec>(topicName('packs'));
      const bus = newBus({ maxBatchBytes: 2048 });
      await bus.ensureTopic(t.name);
      // interleaved keys in one publish (as an export carries several runs), then more of them
      await bus.publish(t, recs(3, 50));
      await bus.publish(t, recs(3, 250, 50));
      expect(bus.stats.published).toBe(900);
      // ~20 bytes a record: a key's 250 do not fit one pack of 2 KiB
      expect(bus.stats.messages).toBeGreaterThan(6);
      expect(bus.stats.messages).toBeLessThan(60);
      const ends = await admin.fetchTopicOffsets(t.name);
      expect(ends.reduce((n, e) => n + Number(e.high), 0)).toBe(bus.stats.messages);
      const c = await collect(newBus(), t, group('packs'));
      await waitUntil(() => c.count() >= 900, 20_000, () => `${c.count()} of 900`);
      await c.sub.close();
      expect(c.byKey).toEqual(inOrder(3, 300));
    }, 60_000);

    it('hands a pack read again (its batch failed) whole, in order, and commits past it once', async () => {
      const t = jsonTopic<Rec>(topicName('pack-again'));
      const g = group('pack-again');
      const bus = newBus();
      await bus.ensureTopic(t.name);
      await bus.publish(t, recs(1, 40));
      expect(bus.stats.messages).toBe(1);
      const deliveries: number[][] = [];
      let fail = true;
      const c = await collect(newBus({ onError: () => undefined }), t, g, async (b) => {
        deliveries.push(b.records.map((r) => r.value.i));
        if (fail) {
          fail = false;
          throw new RetryLaterError('store away (test)'); // a dependency down: the driver reads the batch again from Kafka
        }
      });
      await waitUntil(() => c.count() >= 40, 20_000, () => `${c.count()} of 40`);
      await c.sub.close();
      const all = Array.from({ length: 40 }, (_, i) => i);
      expect(deliveries).toEqual([all, all]);
      const committed = await admin.fetchOffsets({ groupId: g, topics: [t.name] });
      const ends = await admin.fetchTopicOffsets(t.name);
      const written = ends.filter((e) => e.high !== '0');
      expect(written).toHaveLength(1);
      expect(committed[0].partitions.find((p) => p.partition === written[0].partition)?.offset).toBe(written[0].high);
    }, 60_000);

    it('reads records written before packs beside packed ones (an upgrade in place)', async () => {
      const t = jsonTopic<Rec>(topicName('pack-mixed'));
      const old = newBus({ pack: false });
      await old.publish(t, recs(2, 5));
      expect(old.stats.messages).toBe(10);
      const upgraded = newBus();
      await upgraded.publish(t, recs(2, 5, 5));
      expect(upgraded.stats.messages).toBe(2);
      const c = await collect(newBus(), t, group('pack-mixed'));
      await waitUntil(() => c.count() >= 20, 20_000, () => `${c.count()} of 20`);
      await c.sub.close();
      expect(c.byKey).toEqual(inOrder(2, 10));
    }, 60_000);
  });

  describe('records larger than the broker\'s 1 MiB default', () => {
    interface Big {
      k: string;
      i: number;
      pad: string;
    }
    const big = (k: string, i: number, bytes: number): BusRecord<Big> => ({ key: k, value: { k, i, pad: 'x'.repeat(bytes) } });
    const topicMax = async (name: string) => {
      const d = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name }] });
      const all = d.resources[0].configEntries;
      return { max: Number(all.find((e) => e.configName === 'max.message.bytes')?.configValue), all };
    };

    it('creates its topics for its largest record, and a 3 MB record amid small ones is published and consumed (default fetch sizes)', async () => {
      const t = jsonTopic<Big>(topicName('big'));
      const bus = newBus({ compression: 'none' }); // as sent: 3 MB of 'x' would gzip to nothing
      await bus.publish(t, [big('r1', 0, 100), big('r1', 1, 3_000_000), big('r1', 2, 100), big('r2', 0, 100)]);
      expect((await topicMax(t.name)).max).toBe(bus.topicMaxMessageBytes());
      expect(bus.topicMaxMessageBytes()).toBeGreaterThanOrEqual(DEFAULT_MAX_RECORD_BYTES);
      const got: BusRecord<Big>[] = [];
      const sub = await newBus().subscribe(t, { group: group('big') }, async (b) => {
        got.push(...b.records);
      });
      await waitUntil(() => got.length >= 4, 30_000, () => `${got.length} of 4`);
      await sub.close();
      expect(got.filter((r) => r.key === 'r1').map((r) => [r.value.i, r.value.pad.length])).toEqual([[0, 100], [1, 3_000_000], [2, 100]]);
    }, 60_000);

    it('raises max.message.bytes of a topic that exists with less, keeping its other settings', async () => {
      const name = topicName('raise');
      await admin.createTopics({
        topics: [{ topic: name, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: '1048588' }, { name: 'retention.ms', value: '123456789' }] }],
        waitForLeaders: true,
      });
      const bus = newBus({ partitions: 1, compression: 'none' });
      const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
      try {
        await bus.publish(jsonTopic<Big>(name), [big('r1', 0, 3_000_000)]);
        expect(warn).toHaveBeenCalledWith(expect.stringContaining(`had max.message.bytes 1048588; raised to ${bus.topicMaxMessageBytes()}`));
      } finally {
        warn.mockRestore();
      }
      const after = await topicMax(name);
      expect(after.max).toBe(bus.topicMaxMessageBytes());
      expect(after.all.find((e) => e.configName === 'retention.ms')?.configValue).toBe('123456789');
    }, 60_000);

    it('refuses a record larger than maxRecordBytes before sending anything of its publish, naming it', async () => {
      const t = jsonTopic<Big>(topicName('over'));
      const bus = newBus({ maxRecordBytes: 2_000_000 });
      const err = await bus.publish(t, [big('r1', 0, 100), big('r1', 1, 2_500_000), big('r2', 0, 100)]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecordTooLargeError);
      expect((err as RecordTooLargeError).records).toEqual([{ index: 1, bytes: expect.any(Number) }]);
      expect((err as RecordTooLargeError).limit).toBe(2_000_000);
      expect(bus.stats.sends).toBe(0);
    }, 30_000);

    it('turns the broker\'s MESSAGE_TOO_LARGE for a record into a RecordTooLargeError naming it', async () => {
      const t = jsonTopic<Big>(topicName('broker-refuses'));
      // uncompressed: the broker's limit is on the batch as sent, and 3 MB of 'x' gzip to nothing
      const bus = newBus({ partitions: 1, compression: 'none' });
      await bus.ensureTopic(t.name);
      // lowered behind the bus's back (by hand, or another version with a smaller limit)
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: t.name, configEntries: [{ name: 'max.message.bytes', value: '1048588' }] }] });
      let err: unknown;
      for (let i = 0; i < 20 && !(err instanceof RecordTooLargeError); i++) {
        err = await bus.publish(t, [big('r1', 1, 3_000_000)]).catch((e: unknown) => e);
        if (err === undefined) await sleep(500); // the broker had not yet applied the change
      }
      expect(err).toBeInstanceOf(RecordTooLargeError);
      expect((err as RecordTooLargeError).byBroker).toBe(true);
      expect((err as RecordTooLargeError).records).toEqual([{ index: 0, bytes: expect.any(Number) }]);
      // the bus goes on: a record that fits is taken
      await bus.publish(t, [big('r1', 2, 100)]);
    }, 60_000);
  });

  it('never acknowledges a publish the broker took as a retry of one that failed (a lost produce answer)', async () => {
    // The broker appends a send but its answer is lost (a timeout, a connection closed after the
    // write). kafkajs then winds its sequence number back, and the next, different send of the same
    // producer reuses it: the broker takes it for a retry of the one it has, answers OK and writes
    // nothing. That publish must not be acknowledged without its records in the topic.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Broker = require('kafkajs/src/broker') as { prototype: { produce: (req: unknown) => Promise<unknown> } };
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { KafkaJSRequestTimeoutError } = require('kafkajs/src/errors') as { KafkaJSRequestTimeoutError: new (m: string, o: object) => Error };
    const t = jsonTopic<Rec>(topicName('lost-answer'));
    const bus = newBus({ partitions: 1, retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 } });
    await bus.ensureTopic(t.name);
    await bus.publish(t, [{ key: 'r0', value: { k: 'r0', i: 0 } }]);
    const realProduce = Broker.prototype.produce;
    let loseAnswers = true;
    Broker.prototype.produce = async function (this: unknown, req: unknown) {
      const res = await realProduce.call(this, req);
      if (loseAnswers) throw new KafkaJSRequestTimeoutError('Request Produce timed out (answer lost after the write)', { broker: 'it', correlationId: 0, createdAt: 0, sentAt: 0, pendingDuration: 0 });
      return res;
    };
    try {
      await expect(bus.publish(t, [{ key: 'r1', value: { k: 'r1', i: 1 } }])).rejects.toThrow(/timed out/);
    } finally {
      loseAnswers = false;
      Broker.prototype.produce = realProduce;
    }
    await bus.publish(t, [{ key: 'r2', value: { k: 'r2', i: 2 } }]);
    const reader = newBus();
    const got: string[] = [];
    const sub = await reader.subscribe(t, { group: group('lost-answer-reader') }, async (b) => {
      for (const r of b.records) got.push(r.key);
    });
    await waitUntil(() => got.includes('r2'), 20_000, () => `read ${JSON.stringify(got)}, r2 (acknowledged) missing`);
    await sub.close();
    // r1 was written although its publish failed: the caller's retry stores it once more, which
    // readers tell apart (a span sent twice is stored once).
    expect(got).toEqual(['r0', 'r1', 'r2']);
  }, 60_000);

  it('sends what is waiting when closed, then refuses to publish', async () => {
    const t = jsonTopic<Rec>(topicName('close'));
    const bus = newBus({ lingerMs: 10_000 });
    await bus.ensureTopic(t.name);
    let acked = false;
    const p = bus.publish(t, recs(3, 1)).then(() => (acked = true));
    await sleep(50);
    expect(acked).toBe(false);
    await bus.close();
    await p;
    expect(acked).toBe(true);
    await expect(bus.publish(t, recs(1, 1))).rejects.toThrow(/closed/);
    const reader = newBus();
    const got: string[] = [];
    const sub = await reader.subscribe(t, { group: group('close-reader') }, async (b) => {
      for (const r of b.records) got.push(r.key);
    });
    await waitUntil(() => got.length >= 3, 20_000, () => `${got.length} of 3`);
    await sub.close();
    expect(got.sort()).toEqual(['r0', 'r1', 'r2']);
  }, 30_000);
});
