import { INTERNAL_TOKEN_HEADER, type BusBatch, type DeadLetter } from '@neatroots/ports';
import { isInfrastructureError, letterOfRecord, RetryLaterError, withSetAside } from './set-aside';

const batch = (values: unknown[]): BusBatch<unknown> => ({
  topic: 't', partition: 0, records: values.map((value, i) => ({ key: `k${i}`, value })), heartbeat: async () => undefined,
});

describe('isInfrastructureError: a dependency down is never blamed on a message', () => {
  it.each([
    ['connection refused', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['Postgres going down (57P01)', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })],
    ['Postgres out of connections (53300)', Object.assign(new Error('too many clients'), { code: '53300' })],
    ['a model endpoint rate-limiting', Object.assign(new Error('Rate limit reached'), { status: 429 })],
    ['a model endpoint failing', Object.assign(new Error('Bad gateway'), { status: 502 })],
    ['Kafka', Object.assign(new Error('broker not available'), { name: 'KafkaJSConnectionError' })],
    ['a wrapped cause', new Error('storing failed', { cause: Object.assign(new Error('x'), { code: 'ETIMEDOUT' }) })],
    ['the handler saying so', new RetryLaterError('windows unavailable')],
    // what the window store's ioredis throws while Redis restarts (a fault test set spans aside on it)
    ['Redis away (offline queue off)', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    // the embedded stores' disk: a window journal's write, the bus log's (which keeps the cause)
    ['a full disk', Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', syscall: 'write' })],
    ['a full disk under the bus log', new Error('the bus log cannot be written (ENOSPC: no space left on device, write)', { cause: Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' }) })],
    ['a failing disk', Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })],
    // Postgres starting up, a statement cancelled by its timeout, a serialization failure and a deadlock (both pass on a retry)
    ['Postgres starting up (57P03)', Object.assign(new Error('the database system is starting up'), { code: '57P03' })],
    ['a statement timeout (57014)', Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' })],
    ['a serialization failure (40001)', Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' })],
    ['a deadlock (40P01)', Object.assign(new Error('deadlock detected'), { code: '40P01' })],
    // a gRPC service (review) away, too slow or overloaded, also as a client error that kept the status
    ['gRPC UNAVAILABLE', Object.assign(new Error('14 UNAVAILABLE: review: the database system is starting up'), { code: 14, details: 'review: the database system is starting up' })],
    ['gRPC DEADLINE_EXCEEDED', Object.assign(new Error('review service: steering: Deadline exceeded after 10.001s'), { code: 4, details: 'Deadline exceeded after 10.001s' })],
    ['gRPC RESOURCE_EXHAUSTED (overloaded)', Object.assign(new Error('8 RESOURCE_EXHAUSTED: memory ceiling'), { code: 8, details: 'memory ceiling' })],
    // review refusing the calls of a process given another NEATROOTS_INTERNAL_TOKEN (ReviewDataClient's error keeps the status)
    ['gRPC UNAUTHENTICATED for the internal token', Object.assign(new Error("review service: getPlan: this port answers neatroots's own services only: ..."), { code: 16, details: `this port answers neatroots's own services only: the call carried an internal token (${INTERNAL_TOKEN_HEADER}) that does not match this service's NEATROOTS_INTERNAL_TOKEN; give every service the same one` })],
    ['gRPC UNAUTHENTICATED for no internal token', new Error('question service: refused', { cause: Object.assign(new Error('16 UNAUTHENTICATED'), { code: 16, details: `this port answers neatroots's own services only: the call carried no internal token (${INTERNAL_TOKEN_HEADER}); set NEATROOTS_INTERNAL_TOKEN on the calling service to this one's` }) })],
  ])('%s', (_name, err) => expect(isInfrastructureError(err)).toBe(true));

  it.each([
    ['a bigint overflow (22003)', Object.assign(new Error('bigint out of range'), { code: '22003' })],
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'span')")],
    ['a RangeError', new RangeError('Maximum call stack size exceeded')],
    ['a 400 from a model endpoint', Object.assign(new Error('invalid request'), { status: 400 })],
    ['gRPC INTERNAL', Object.assign(new Error('13 INTERNAL: review: bad'), { code: 13, details: 'review: bad' })],
    ['gRPC INVALID_ARGUMENT', Object.assign(new Error('3 INVALID_ARGUMENT: plan: not valid JSON'), { code: 3, details: 'plan: not valid JSON' })],
    ['a gRPC message over the size limit', Object.assign(new Error('8 RESOURCE_EXHAUSTED: Received message larger than max (5000000 vs. 4194304)'), { code: 8, details: 'Received message larger than max (5000000 vs. 4194304)' })],
    ['a numeric code that is no gRPC status', Object.assign(new Error('exit'), { code: 14 })],
    ['gRPC UNAUTHENTICATED for something else than the internal token', Object.assign(new Error('16 UNAUTHENTICATED: unknown API key'), { code: 16, details: 'unknown API key' })],
  ])('but %s is the message\'s', (_name, err) => expect(isInfrastructureError(err)).toBe(false));
});

describe('withSetAside', () => {
  const ctx = (over: Partial<Parameters<typeof withSetAside>[1]> = {}) => ({ topic: 't', group: 'g', stopping: () => false, onError: () => undefined, ...over });

  it('sets aside only the record that fails alone, after bounded tries, and hands the others on', async () => {
    const letters: DeadLetter[] = [];
    const handled: unknown[] = [];
    let calls = 0;
    const guarded = withSetAside(
      async (b) => {
        calls++;
        if (b.records.some((r) => (r.value as { bad?: boolean }).bad)) throw new TypeError('cannot take it');
        handled.push(...b.records.map((r) => r.value));
      },
      ctx({ sink: { setAside: async (l) => void letters.push(...l) } }),
      { attempts: 2, retryDelayMs: 1 },
    );
    await guarded(batch([{ n: 1, project: 'p', run_id: 'r1' }, { n: 2, bad: true, project: 'p', id: 'f9', run_id: 'r2' }, { n: 3 }]));
    expect(handled).toEqual([{ n: 1, project: 'p', run_id: 'r1' }, { n: 3 }]);
    expect(letters).toEqual([{ project: 'p', source: 'bus:t/g', kind: 'message', run_id: 'r2', item_id: 'f9', reason: 'cannot take it', payload: { n: 2, bad: true, project: 'p', id: 'f9', run_id: 'r2' } }]);
    expect(calls).toBe(2 + 1 + 2 + 1); // the batch twice, then each record (the bad one twice)
  });

  it('rethrows at once when a dependency is down, and when the subscription is closing', async () => {
    const down = withSetAside(async () => { throw Object.assign(new Error('x'), { code: 'ECONNRESET' }); }, ctx(), { attempts: 5, retryDelayMs: 1 });
    await expect(down(batch([1]))).rejects.toThrow('x');
    const closing = withSetAside(async () => { throw new TypeError('bad'); }, ctx({ stopping: () => true }), { attempts: 5, retryDelayMs: 1 });
    await expect(closing(batch([1]))).rejects.toThrow('bad');
  });

  it('retries and sets aside a handler that throws before returning a promise, as one that rejects', async () => {
    const letters: DeadLetter[] = [];
    let calls = 0;
    const sync = ((): Promise<void> => {
      calls++;
      throw new TypeError('thrown at once');
    }) as (b: BusBatch<unknown>) => Promise<void>;
    const guarded = withSetAside(sync, ctx({ sink: { setAside: async (l) => void letters.push(...l) } }), { attempts: 3, retryDelayMs: 1 });
    await guarded(batch([{ n: 1, run_id: 'r1' }]));
    expect(calls).toBe(3);
    expect(letters.map((l) => [l.run_id, l.reason])).toEqual([['r1', 'thrown at once']]);
  });

  it('fails the batch when the dead letter cannot be kept (it is read again, nothing is lost)', async () => {
    const guarded = withSetAside(async () => { throw new TypeError('bad'); }, ctx({ sink: { setAside: async () => { throw new Error('bus is closed'); } } }), { attempts: 1 });
    await expect(guarded(batch([1]))).rejects.toThrow('bus is closed');
  });

  it('reads project, run and id from an envelope of the events topic', () => {
    const env = { project: 'shop', received_ms: 1, item: { kind: 'span', span: { run_id: 'r1', span_id: 's1' } } };
    expect(letterOfRecord({ key: 'r1', value: env }, { topic: 'neatroots.events', group: 'rule-engine' }, new Error('boom'))).toMatchObject({
      project: 'shop', source: 'bus:neatroots.events/rule-engine', kind: 'span', run_id: 'r1', item_id: 's1', reason: 'boom',
    });
  });
});
