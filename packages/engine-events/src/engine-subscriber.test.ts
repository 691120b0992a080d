import { TestEngine, type TestEngineOptions } from '@kvreuse-internal/test-engine';
import { blockHashSalt, hashBlockChain, RetainedInventory } from '@kvreuse/inventory';
import { Gauge, Registry } from 'prom-client';
import { afterEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import { Encoder } from '@msgpack/msgpack';
import { Dealer, Router, Subscriber, XPublisher } from 'zeromq';
import { EngineInventoryFeed } from './engine-inventory-feed.js';
import type { EngineEventsInputError } from './errors.js';
import {
  EngineEventSubscriber,
  type EngineRankSource,
  type EngineSubscriberEvent,
  type EngineSubscriberOptions,
  maxEngineRanks,
  rankEndpoint,
  subscribeEngineRanks,
} from './engine-subscriber.js';
import { sequenceBytes } from './replay-client.js';
import { registerEngineEventMetrics } from './subscriber-metrics.js';
import { vllmIntBlockHash } from './vllm-block-hash.js';

const scheme = { salt: blockHashSalt('cd'.repeat(32), 'seed'), blockTokens: 16 };
const conversation = (first: number, blocks: number): number[] =>
  Array.from({ length: blocks * 16 }, (_, i) => first + i);
const opened: { close(): unknown }[] = [];
afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close();
});
/**
 * Every spy belongs to the test that made it: its calls start there and its implementation ends with it.
 * vitest leaves a spy on a method the sockets inherit (`Subscriber.prototype.close`) in place when it is
 * restored, still counting, and hands it back to the next `vi.spyOn`: hence cleared when made, restored after.
 */
const spies: MockInstance[] = [];
afterEach(() => {
  for (const spy of spies.splice(0)) spy.mockRestore();
});
function spied<Spy extends MockInstance>(spy: Spy): Spy {
  spies.push(spy);
  return spy.mockClear();
}

/** A test engine, and a subscriber feeding an inventory from it; `until` resolves once the events seen pass a check. */
async function follow(
  engineOptions: TestEngineOptions = {},
  options: Partial<EngineSubscriberOptions> & {
    replay?: boolean;
    before?: (engine: TestEngine) => Promise<unknown>;
  } = {},
) {
  const engine = await TestEngine.open(engineOptions);
  opened.push(engine);
  const { replay = true, before, ...overrides } = options;
  await before?.(engine);
  const inventory = new RetainedInventory();
  const feed = new EngineInventoryFeed({ inventory, scheme });
  const seen: EngineSubscriberEvent[] = [];
  const waiting: (() => boolean)[] = [];
  const subscriber = new EngineEventSubscriber({
    endpoint: engine.endpoint,
    ...(replay ? { replayEndpoint: engine.replayEndpoint } : {}),
    workerId: 'engine-a/dp0',
    feed,
    onEvent: (event) => {
      seen.push(event);
      waiting.splice(0, waiting.length, ...waiting.filter((check) => !check()));
    },
    ...overrides,
  });
  opened.push(subscriber);
  await engine.waitForSubscribers();
  const until = (check: (events: EngineSubscriberEvent[]) => boolean): Promise<void> =>
    new Promise((resolve) => {
      const test = (): boolean => check(seen) && (resolve(), true);
      if (!test()) waiting.push(test);
    });
  const batches = (count: number) =>
    until((events) => events.filter((event) => event.kind === 'batch').length >= count);
  const prefix = (tokens: number[]) => inventory.longestRetainedPrefix(hashBlockChain(tokens, scheme))[0];
  return { engine, inventory, feed, subscriber, seen, until, batches, prefix };
}

describe('EngineEventSubscriber against the test engine', () => {
  for (const [encoding, hashForm] of [
    ['map', 'bytes'],
    ['array', 'uint64'],
    ['map', 'int64'],
  ] as const) {
    it(`round-trips stores and removals (${encoding} encoding, ${hashForm} hashes)`, async () => {
      const { engine, feed, batches, prefix, subscriber } = await follow({ encoding, hashForm });
      const tokens = conversation(100, 3);
      const hashes = await engine.store(tokens);
      await engine.store([...tokens, ...conversation(900, 1)], 'CPU');
      await batches(2);
      expect(prefix(tokens)).toMatchObject({ workerId: 'engine-a/dp0', blocks: 3, gpuBlocks: 3 });
      const published = hashForm === 'bytes' ? hashes[2]! : vllmIntBlockHash(hashes[2]!);
      expect(feed.kvreuseHashOf('engine-a/dp0', published)).toBe(hashBlockChain(tokens, scheme)[2]);
      await engine.remove(hashes.slice(1));
      await batches(3);
      expect(prefix(tokens)).toMatchObject({ blocks: 1 });
      expect(subscriber.metrics()).toMatchObject({
        batches: 3,
        events: { stored: 2, removed: 1, cleared: 0, unknown: 0 },
        blocksStored: 4,
        blocksRemoved: 2,
        gaps: 0,
        restarts: 0,
        lastSeq: 2n,
      });
    });
  }

  for (const replayFrames of ['delimited', 'bare'] as const) {
    it(`repairs a gap from the replay socket (${replayFrames} replies)`, async () => {
      const { engine, batches, prefix, seen, subscriber } = await follow({ replayFrames });
      engine.dropNext(2);
      await engine.store(conversation(0, 2));
      await engine.store(conversation(5000, 1));
      await engine.store(conversation(7000, 1));
      await batches(3);
      expect(seen.filter((event) => event.kind !== 'batch')).toEqual([
        { kind: 'gap', from: 0n, to: 2n },
        { kind: 'replayed', from: 0n, to: 2n, batches: 2, unrepaired: 0 },
      ]);
      expect(seen.filter((event) => event.kind === 'batch').map((event) => [event.seq, event.replayed])).toEqual([
        [0n, true],
        [1n, true],
        [2n, false],
      ]);
      expect(prefix(conversation(0, 2))?.blocks).toBe(2);
      expect(subscriber.metrics()).toMatchObject({
        gaps: 1,
        missedBatches: 2,
        replays: 1,
        replayedBatches: 2,
        unrepairedBatches: 0,
      });
      const registry = new Registry();
      registerEngineEventMetrics(registry, () => [subscriber]);
      const text = await registry.metrics();
      for (const line of [
        'kvreuse_engine_event_batches_total{worker="engine-a/dp0"} 3',
        'kvreuse_engine_event_events_total{worker="engine-a/dp0",type="stored"} 3',
        'kvreuse_engine_event_blocks_total{worker="engine-a/dp0",change="stored"} 4',
        'kvreuse_engine_event_gaps_total{worker="engine-a/dp0"} 1',
        'kvreuse_engine_event_replayed_batches_total{worker="engine-a/dp0"} 2',
        'kvreuse_engine_event_restarts_total{worker="engine-a/dp0"} 0',
      ])
        expect(text).toContain(line);
      expect(text).toMatch(/^kvreuse_engine_event_lag_seconds\{worker="engine-a\/dp0"\} [\d.e-]+$/m);
    });
  }

  it('replays what was published before it joined', async () => {
    // Published before any subscriber: the live stream drops it, the replay buffer keeps it.
    const { engine, batches, prefix, seen } = await follow({}, { before: (early) => early.store(conversation(0, 2)) });
    await engine.store(conversation(0, 3));
    await batches(2);
    expect(seen[0]).toEqual({ kind: 'gap', from: 0n, to: 1n });
    expect(prefix(conversation(0, 3))?.blocks).toBe(3);
  });

  it('counts a gap it cannot repair without a replay socket', async () => {
    const { engine, batches, subscriber } = await follow({}, { replay: false });
    engine.dropNext();
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    await batches(1);
    expect(subscriber.metrics()).toMatchObject({ gaps: 1, missedBatches: 1, replays: 0, unrepairedBatches: 1 });
  });

  it("starts the worker's inventory afresh when the publisher restarts", async () => {
    const { engine, feed, batches, prefix, seen, subscriber } = await follow();
    await engine.store(conversation(0, 2));
    await engine.store(conversation(400, 1));
    await batches(2);
    engine.restart();
    await engine.store(conversation(800, 1));
    await batches(3);
    expect(seen.filter((event) => event.kind === 'restart')).toEqual([{ kind: 'restart', seq: 0n, ignored: false }]);
    expect(prefix(conversation(0, 2))).toBeUndefined();
    expect(prefix(conversation(800, 1))).toMatchObject({ incarnation: 'engine-a/dp0#1', blocks: 1 });
    expect(feed.identity('engine-a/dp0')).toEqual({ incarnation: 'engine-a/dp0#1', epoch: 2 });
    expect(subscriber.metrics()).toMatchObject({ restarts: 1, ignoredRestarts: 0, gaps: 0 });
  });

  it('counts and skips malformed frames, then goes on', async () => {
    const { engine, batches, prefix, seen, subscriber } = await follow();
    await engine.sendFrames(['', 'only two']);
    await engine.sendFrames(['', Buffer.alloc(7), Buffer.alloc(1)]);
    await engine.publishPayload(Uint8Array.from([0xc1]));
    await engine.store(conversation(0, 1));
    await batches(1);
    expect(seen.filter((event) => event.kind === 'malformed')).toEqual([
      { kind: 'malformed', seq: null, reason: 'a message is 3 frames, not 2' },
      { kind: 'malformed', seq: null, reason: 'a sequence number is 8 bytes, not 7' },
      { kind: 'malformed', seq: 0n, reason: expect.stringMatching(/not msgpack/) },
    ]);
    expect(subscriber.metrics()).toMatchObject({
      malformed: { frames: 1, sequence: 1, payload: 1 },
      gaps: 0,
      batches: 1,
    });
    expect(prefix(conversation(0, 1))?.blocks).toBe(1);
  });
});

describe('EngineEventSubscriber closed while it repairs a gap', () => {
  it('applies nothing more and counts no replay failure: the replay did not fail, it was let go', async () => {
    // A replay socket that takes requests and never answers.
    const silent = new Router({ linger: 0 });
    await silent.bind('tcp://127.0.0.1:*');
    opened.push(silent);
    const { engine, subscriber, seen, prefix } = await follow({}, { replayEndpoint: silent.lastEndpoint! });
    engine.dropNext();
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    await silent.receive();
    await subscriber.close();
    expect(seen).toEqual([{ kind: 'gap', from: 0n, to: 1n }]);
    expect(prefix(conversation(300, 1))).toBeUndefined();
    expect(subscriber.metrics()).toMatchObject({ gaps: 1, replays: 1, replayFailures: 0, batches: 0 });
  });
});

describe('EngineEventSubscriber closed twice', () => {
  it('resolves the second close, too, only once its receive loop has ended', async () => {
    // A replay socket that takes requests and never answers: the receive loop waits in the replay.
    const silent = new Router({ linger: 0 });
    await silent.bind('tcp://127.0.0.1:*');
    opened.push(silent);
    const { engine, subscriber } = await follow({}, { replayEndpoint: silent.lastEndpoint! });
    engine.dropNext();
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    await silent.receive();
    let ended = false;
    void subscriber.done.then(() => (ended = true));
    const first = subscriber.close();
    await subscriber.close();
    expect(ended).toBe(true);
    await first;
  });
});

describe('EngineEventSubscriber closed by its own onEvent', () => {
  it('asks for no replay once closed on a gap', async () => {
    let closing: Promise<void> | undefined;
    const { engine, subscriber, seen } = await follow(
      {},
      {
        onEvent: (event) => {
          seen.push(event);
          if (event.kind === 'gap') closing = subscriber.close();
        },
      },
    );
    engine.dropNext();
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    // The receive loop ends only once the gap's onEvent closed the subscriber.
    await subscriber.done;
    await closing;
    expect(seen).toEqual([{ kind: 'gap', from: 0n, to: 1n }]);
    expect(subscriber.metrics()).toMatchObject({ gaps: 1, replays: 0, batches: 0 });
  });

  it('reports no gap once closed on a restart whose batch also opens one', async () => {
    let closing: Promise<void> | undefined;
    let twoBatches!: () => void;
    const twoBatchesApplied = new Promise<void>((resolve) => (twoBatches = resolve));
    const { engine, subscriber, seen } = await follow(
      {},
      {
        onEvent: (event) => {
          seen.push(event);
          if (seen.filter(({ kind }) => kind === 'batch').length === 2) twoBatches();
          if (event.kind === 'restart') closing = subscriber.close();
        },
      },
    );
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    await twoBatchesApplied;
    // The restarted publisher's first batch (seq 0) is lost: its second (seq 1) goes back from the 2
    // expected, a restart, and skips 0, a gap.
    engine.restart();
    engine.dropNext();
    await engine.store(conversation(600, 1));
    await engine.store(conversation(900, 1));
    await subscriber.done;
    await closing;
    expect(seen.map((event) => event.kind)).toEqual(['batch', 'batch', 'restart']);
    expect(subscriber.metrics()).toMatchObject({ restarts: 1, gaps: 0, replays: 0, batches: 2 });
  });
});

describe('EngineEventSubscriber whose onEvent throws', () => {
  it('reports it as a warning and goes on with the next batch', async () => {
    const warn = spied(vi.spyOn(process, 'emitWarning')).mockImplementation(() => {});
    const kinds: string[] = [];
    let settled!: () => void;
    const secondBatchOrFailure = new Promise<void>((resolve) => (settled = resolve));
    const { engine, prefix } = await follow(
      {},
      {
        onEvent: (event) => {
          kinds.push(event.kind);
          if (event.kind === 'failed' || kinds.length === 2) settled();
          if (kinds.length === 1) throw new Error('the log is full');
        },
      },
    );
    await engine.store(conversation(0, 1));
    await engine.store(conversation(300, 1));
    await secondBatchOrFailure;
    expect(kinds).toEqual(['batch', 'batch']);
    expect(prefix(conversation(0, 1))?.blocks).toBe(1);
    expect(prefix(conversation(300, 1))?.blocks).toBe(1);
    expect(warn).toHaveBeenCalledWith(
      'engine events: onEvent of engine-a/dp0 threw on a "batch" event: the log is full',
    );
  });
});

describe('EngineEventSubscriber whose options object is changed after it opened', () => {
  it('goes on with the options it was given', async () => {
    const engine = await TestEngine.open();
    opened.push(engine);
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    let applied!: () => void;
    const batch = new Promise<void>((resolve) => (applied = resolve));
    const options = {
      endpoint: engine.endpoint,
      workerId: 'engine-a/dp0',
      feed,
      onEvent: (event: EngineSubscriberEvent) => event.kind === 'batch' && applied(),
    };
    const subscriber = new EngineEventSubscriber(options);
    opened.push(subscriber);
    options.workerId = 'someone-else/dp0';
    await engine.waitForSubscribers();
    await engine.store(conversation(0, 1));
    await batch;
    expect(subscriber.workerId).toBe('engine-a/dp0');
    expect(feed.heldBlocks('engine-a/dp0')).toEqual({ gpu: 1, host: 0 });
    expect(feed.identity('someone-else/dp0')).toBeUndefined();
  });
});

describe('EngineEventSubscriber when the inventory refuses a batch', () => {
  it('counts it with the reason and goes on', async () => {
    const { engine, inventory, until, subscriber } = await follow();
    // Another writer holds epoch 1 of this worker id under another incarnation: the feed's batches are refused.
    inventory.apply({ workerId: 'engine-a/dp0', incarnation: 'someone-else', epoch: 1, seq: 1, events: [] });
    await engine.store(conversation(0, 1));
    await until((events) => events.some((event) => event.kind === 'malformed'));
    expect(subscriber.metrics()).toMatchObject({ malformed: { payload: 1 }, batches: 0, lastSeq: 0n });
  });
});

describe('EngineEventSubscriber when the inventory refuses a restart', () => {
  it('stops with a failed event naming the refusal, its sockets closed, the worker as it was', async () => {
    const { engine, inventory, feed, batches, until, seen, subscriber } = await follow();
    await engine.store(conversation(0, 1));
    await batches(1);
    // Another writer holds the epoch the restart would take under another incarnation: the restart is refused.
    inventory.apply({ workerId: 'engine-a/dp0', incarnation: 'someone-else', epoch: 2, seq: 1, events: [] });
    engine.restart();
    await engine.store(conversation(800, 1));
    await until((events) => events.some((event) => event.kind === 'failed'));
    await subscriber.done;
    expect(seen.map((event) => event.kind)).toEqual(['batch', 'failed']);
    expect(seen[1]).toEqual({
      kind: 'failed',
      reason: 'inventory event: incarnation = "engine-a/dp0#1" is refused: epoch 2 belongs to incarnation someone-else',
    });
    expect(feed.identity('engine-a/dp0')).toEqual({ incarnation: 'engine-a/dp0#0', epoch: 1 });
    expect(subscriber.metrics()).toMatchObject({ restarts: 0, ignoredRestarts: 0, batches: 1 });
  });
});

describe('EngineEventSubscriber when the inventory ignores a batch', () => {
  it('reports it as ignored and counts it apart from the batches applied', async () => {
    const { engine, inventory, batches, seen, subscriber, prefix } = await follow();
    // Another writer holds a newer epoch of this worker id: the feed's batches are ignored.
    inventory.apply({ workerId: 'engine-a/dp0', incarnation: 'newer', epoch: 2, seq: 1, events: [] });
    await engine.store(conversation(0, 1));
    await batches(1);
    expect(seen).toEqual([
      {
        kind: 'batch',
        seq: 0n,
        replayed: false,
        outcome: { stored: 0, removed: 0, cleared: false, skipped: {}, ignored: true },
      },
    ]);
    expect(prefix(conversation(0, 1))).toBeUndefined();
    expect(subscriber.metrics()).toMatchObject({ batches: 0, ignoredBatches: 1, blocksStored: 0, lastSeq: 0n });
    const registry = new Registry();
    registerEngineEventMetrics(registry, () => [subscriber]);
    expect(await registry.metrics()).toContain('kvreuse_engine_event_ignored_batches_total{worker="engine-a/dp0"} 1');
  });
});

describe('EngineEventSubscriber when the inventory ignores a restart', () => {
  it('reports the restart as ignored and counts it apart from the restarts applied', async () => {
    const { engine, inventory, feed, batches, seen, subscriber } = await follow();
    await engine.store(conversation(0, 1));
    await batches(1);
    // Another writer holds a newer epoch than the restart would take: the feed's restart is ignored.
    inventory.apply({ workerId: 'engine-a/dp0', incarnation: 'newer', epoch: 3, seq: 1, events: [] });
    engine.restart();
    await engine.store(conversation(800, 1));
    await batches(2);
    expect(seen.filter((event) => event.kind === 'restart')).toEqual([{ kind: 'restart', seq: 0n, ignored: true }]);
    expect(feed.identity('engine-a/dp0')).toEqual({ incarnation: 'engine-a/dp0#0', epoch: 1 });
    expect(subscriber.metrics()).toMatchObject({ restarts: 0, ignoredRestarts: 1, batches: 1, ignoredBatches: 1 });
    const registry = new Registry();
    registerEngineEventMetrics(registry, () => [subscriber]);
    const text = await registry.metrics();
    expect(text).toContain('kvreuse_engine_event_restarts_total{worker="engine-a/dp0"} 0');
    expect(text).toContain('kvreuse_engine_event_ignored_restarts_total{worker="engine-a/dp0"} 1');
  });
});

describe('EngineEventSubscriber given an endpoint ZMQ cannot connect to', () => {
  it('refuses it, naming it, and leaves no socket open', () => {
    const close = spied(vi.spyOn(Subscriber.prototype, 'close'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    // 108 bytes: one more than a unix socket address holds.
    const endpoint = `ipc:///tmp/${'k'.repeat(103)}`;
    expect(() => new EngineEventSubscriber({ endpoint, workerId: 'engine-c/dp0', feed })).toThrow(
      expect.objectContaining({
        code: 'ENGINE_EVENTS_INVALID_INPUT',
        argument: 'options.endpoint',
        value: endpoint,
        reason: 'ZMQ cannot connect to it: File name too long (ENAMETOOLONG)',
      }),
    );
    expect(close).toHaveBeenCalledOnce();
  });
});

describe('EngineEventSubscriber given a replay endpoint ZMQ cannot connect to', () => {
  it('refuses it, naming it, and leaves no socket open, rather than failing at the first gap', () => {
    const subscriberClose = spied(vi.spyOn(Subscriber.prototype, 'close'));
    const dealerClose = spied(vi.spyOn(Dealer.prototype, 'close'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    // 108 bytes: one more than a unix socket address holds.
    const replayEndpoint = `ipc:///tmp/${'r'.repeat(103)}`;
    const options = { endpoint: 'inproc://engine-g', replayEndpoint, workerId: 'engine-g/dp0', feed };
    expect(() => new EngineEventSubscriber(options)).toThrow(
      expect.objectContaining({
        code: 'ENGINE_EVENTS_INVALID_INPUT',
        argument: 'options.replayEndpoint',
        value: replayEndpoint,
        reason: 'ZMQ cannot connect to it: File name too long (ENAMETOOLONG)',
      }),
    );
    expect(subscriberClose).toHaveBeenCalledOnce();
    expect(dealerClose).toHaveBeenCalledOnce();
  });
});

describe('registerEngineEventMetrics', () => {
  it('refuses a registry or a subscriber list that is not one, naming it, and registers nothing', async () => {
    const registry = new Registry();
    const refused = (argument: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument });
    expect(() => registerEngineEventMetrics({} as never, () => [])).toThrow(refused('registry'));
    expect(() => registerEngineEventMetrics(registry, [] as never)).toThrow(refused('subscribers'));
    expect(registry.getMetricsAsArray()).toEqual([]);
  });

  it('refuses a registry that holds one of its metrics already, naming it, and registers none of the others', () => {
    const registry = new Registry();
    const held = new Gauge({ name: 'kvreuse_engine_event_lag_seconds', help: 'held', registers: [registry] });
    expect(() => registerEngineEventMetrics(registry, () => [])).toThrow(
      expect.objectContaining({
        code: 'ENGINE_EVENTS_INVALID_INPUT',
        argument: 'registry',
        message:
          'engine events: registry = "kvreuse_engine_event_lag_seconds" is refused: a registry without the engine event metrics: it holds this one already',
      }),
    );
    expect(registry.getMetricsAsArray()).toEqual([held]);
  });
});

describe('rankEndpoint', () => {
  it('derives each data-parallel rank as vLLM does', () => {
    expect(rankEndpoint('tcp://10.0.0.5:5557', 0)).toBe('tcp://10.0.0.5:5557');
    expect(rankEndpoint('tcp://10.0.0.5:5557', 3)).toBe('tcp://10.0.0.5:5560');
    expect(rankEndpoint('tcp://*:5557', 1)).toBe('tcp://*:5558');
    expect(rankEndpoint('ipc:///tmp/kv', 2)).toBe('ipc:///tmp/kv_dp2');
    expect(() => rankEndpoint('udp://x', 1)).toThrow(/tcp:\/\/host:port/);
    expect(() => rankEndpoint('tcp://x:1', -1)).toThrow(/whole number/);
  });

  it('refuses an endpoint of another shape, and a port that leaves the rank no port, naming both', () => {
    const refused = (endpoint: string, rank: number) =>
      expect(() => rankEndpoint(endpoint, rank)).toThrow(
        expect.objectContaining({
          name: 'EndpointShapeError',
          code: 'ENGINE_EVENTS_INVALID_INPUT',
          argument: 'endpoint',
          value: endpoint,
          reason: 'an endpoint is tcp://host:port, ipc://… or inproc://…',
        }),
      );
    for (const endpoint of ['udp://x:1', 'tcp://x', 'ipc://', 'inproc://']) refused(endpoint, 0);
    const noPort = (endpoint: string, rank: number) =>
      expect(() => rankEndpoint(endpoint, rank)).toThrow(
        expect.objectContaining({
          name: 'RankPortError',
          argument: 'endpoint',
          endpoint,
          rank,
          message: `engine events: endpoint = ${JSON.stringify(endpoint)} is refused: leaves no port for rank ${rank} (rank r follows port + r, from 1 to 65535)`,
        }),
      );
    noPort('tcp://10.0.0.5:65535', 1);
    noPort('tcp://10.0.0.5:65000', 536);
    noPort('tcp://10.0.0.5:0', 0);
    noPort('tcp://10.0.0.5:65536', 0);
    expect(rankEndpoint('tcp://10.0.0.5:65000', 535)).toBe('tcp://10.0.0.5:65535');
  });
});

/**
 * `engine`'s two ranks, each an inproc XPUB (rank 1's name is rank 0's with `_dp1` appended), followed by
 * `subscribeEngineRanks`; `publish(rank, seq)` sends that rank an empty batch and resolves once `onEvent` heard it.
 */
async function followTwoRanks(
  engine: string,
  onEvent: (event: EngineSubscriberEvent, source: EngineRankSource) => void,
) {
  const publishers = [new XPublisher({ linger: 0 }), new XPublisher({ linger: 0 })] as const;
  opened.push(...publishers);
  await publishers[0].bind(`inproc://${engine}`);
  await publishers[1].bind(`inproc://${engine}_dp1`);
  const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
  let heard = (): void => {};
  const subscribers = await subscribeEngineRanks({
    engine,
    endpoint: `inproc://${engine}`,
    ranks: 2,
    feed,
    onEvent: (event, source) => {
      onEvent(event, source);
      heard();
    },
  });
  opened.push(...subscribers);
  // An XPUB hears each subscription: once both have theirs, nothing published is dropped.
  await Promise.all(publishers.map((publisher) => publisher.receive()));
  const payload = new Encoder().encode([1.5, [], null]);
  const publish = async (rank: 0 | 1, seq: bigint): Promise<void> => {
    const event = new Promise<void>((resolve) => (heard = resolve));
    await publishers[rank].send(['', sequenceBytes(seq), payload]);
    await event;
  };
  return { feed, subscribers, publish };
}

describe('subscribeEngineRanks', () => {
  it('tells onEvent the rank, worker and subscriber each event came from', async () => {
    const seen: [string, EngineRankSource][] = [];
    const { subscribers, publish } = await followTwoRanks('engine-h', (event, source) =>
      seen.push([event.kind, source]),
    );
    // One rank at a time, rank 1 first: the order onEvent hears them in is the order they were sent in.
    await publish(1, 0n);
    await publish(0, 0n);
    expect(seen).toEqual([
      ['batch', { rank: 1, workerId: 'engine-h/dp1', subscriber: subscribers[1] }],
      ['batch', { rank: 0, workerId: 'engine-h/dp0', subscriber: subscribers[0] }],
    ]);
  });

  it('goes on following one rank after another stopped', async () => {
    // Rank 0's feed breaks (an error that is no refusal of the inventory's): that rank stops, and only that one.
    const apply = EngineInventoryFeed.prototype.apply;
    spied(vi.spyOn(EngineInventoryFeed.prototype, 'apply')).mockImplementation(function (
      this: EngineInventoryFeed,
      workerId,
      batch,
    ) {
      if (workerId === 'engine-s/dp0') throw new Error('the feed broke');
      return apply.call(this, workerId, batch);
    });
    const seen: string[] = [];
    const { feed, subscribers, publish } = await followTwoRanks('engine-s', (event, { workerId }) =>
      seen.push(`${workerId}: ${event.kind}`),
    );
    await publish(0, 0n);
    // Rank 0's receive loop has ended on its own: nothing closed it.
    await subscribers[0]!.done;
    await publish(1, 0n);
    await publish(1, 1n);
    expect(seen).toEqual(['engine-s/dp0: failed', 'engine-s/dp1: batch', 'engine-s/dp1: batch']);
    expect(subscribers.map((subscriber) => subscriber.metrics().batches)).toEqual([0, 2]);
    expect(feed.identity('engine-s/dp1')).toBeDefined();
  });

  it('leaves no rank open when another rank cannot be opened', async () => {
    const connect = spied(vi.spyOn(Subscriber.prototype, 'connect'));
    const close = spied(vi.spyOn(Subscriber.prototype, 'close'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const ranks = { engine: 'engine-b', feed, ranks: 2 };
    // Rank 1's replay endpoint cannot be derived from rank 0's.
    await expect(
      subscribeEngineRanks({ ...ranks, endpoint: 'tcp://127.0.0.1:5557', replayEndpoint: 'udp://x' }),
    ).rejects.toThrow(
      expect.objectContaining({
        name: 'EndpointShapeError',
        code: 'ENGINE_EVENTS_INVALID_INPUT',
        argument: 'options.replayEndpoint',
        value: 'udp://x',
      }),
    );
    // Rank 1's port would be 65536: no rank is opened.
    await expect(subscribeEngineRanks({ ...ranks, endpoint: 'tcp://127.0.0.1:65535' })).rejects.toThrow(
      expect.objectContaining({ name: 'RankPortError', argument: 'options.endpoint', rank: 1 }),
    );
    await expect(
      subscribeEngineRanks({ ...ranks, endpoint: 'tcp://127.0.0.1:5557', replayEndpoint: 'tcp://127.0.0.1:65535' }),
    ).rejects.toThrow(expect.objectContaining({ name: 'RankPortError', argument: 'options.replayEndpoint', rank: 1 }));
    expect(connect).not.toHaveBeenCalled();
    // Rank 0's ipc path fits a socket address (107 bytes at most), rank 1's (`_dp1` appended) does not.
    const endpoint = `ipc:///tmp/${'k'.repeat(99)}`;
    await expect(subscribeEngineRanks({ ...ranks, endpoint })).rejects.toThrow(
      expect.objectContaining({
        argument: 'options.endpoint',
        value: endpoint,
        reason: `rank 1 follows ${endpoint}_dp1: ZMQ cannot connect to it: File name too long (ENAMETOOLONG)`,
      }),
    );
    expect(connect).toHaveBeenCalled();
    expect(close).toHaveBeenCalledTimes(connect.mock.calls.length);
  });

  it('has ended the receive loop of every rank it opened, and closed its sockets, when it rejects', async () => {
    // Rank 0's ipc path fits a socket address (107 bytes at most), rank 1's (`_dp1` appended) does not.
    const endpoint = `ipc:///tmp/${'m'.repeat(99)}`;
    const seen: string[] = [];
    const socketClose = spied(vi.spyOn(Subscriber.prototype, 'close'));
    const close = EngineEventSubscriber.prototype.close;
    spied(vi.spyOn(EngineEventSubscriber.prototype, 'close')).mockImplementation(function (
      this: EngineEventSubscriber,
    ) {
      void this.done.then(() => seen.push(`${this.workerId}: receive loop ended`));
      return close.call(this);
    });
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    await subscribeEngineRanks({ engine: 'engine-m', endpoint, ranks: 2, feed }).catch((error: unknown) => {
      // Rank 1's own socket, closed by its constructor, and rank 0's.
      seen.push(
        `rejected (${socketClose.mock.calls.length} sockets closed): ${(error as EngineEventsInputError).reason}`,
      );
    });
    expect(seen).toEqual([
      'engine-m/dp0: receive loop ended',
      `rejected (2 sockets closed): rank 1 follows ${endpoint}_dp1: ZMQ cannot connect to it: File name too long (ENAMETOOLONG)`,
    ]);
  });

  it('refuses missing options and an engine that is not a name, before it connects', async () => {
    const connect = spied(vi.spyOn(Subscriber.prototype, 'connect'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const refused = (argument: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument });
    await expect(subscribeEngineRanks(null as never)).rejects.toThrow(refused('options'));
    for (const engine of [undefined, '', 7])
      await expect(subscribeEngineRanks({ engine, endpoint: 'inproc://engine-e', feed } as never)).rejects.toThrow(
        refused('options.engine'),
      );
    expect(connect).not.toHaveBeenCalled();
  });

  it('refuses more than 1024 ranks, naming the count and the bound, before it connects', async () => {
    // A connect that throws: a rank reached says so at once (the subscriber closes its socket).
    const connect = spied(vi.spyOn(Subscriber.prototype, 'connect')).mockImplementation(() => {
      throw new Error('connect reached');
    });
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const options = { engine: 'engine-f', endpoint: 'inproc://engine-f', feed };
    await expect(subscribeEngineRanks({ ...options, ranks: 1025 })).rejects.toThrow(
      expect.objectContaining({
        code: 'ENGINE_EVENTS_INVALID_INPUT',
        argument: 'options.ranks',
        value: 1025,
        message: 'engine events: options.ranks = 1025 is refused: a number of ranks is a whole number from 1 to 1024',
      }),
    );
    expect(connect).not.toHaveBeenCalled();
    // 1024 ranks pass the check and go on to connect rank 0.
    await expect(subscribeEngineRanks({ ...options, ranks: 1024 })).rejects.toThrow(
      expect.objectContaining({ argument: 'options.endpoint' }),
    );
    expect(connect).toHaveBeenCalledTimes(1);
  });

  it('refuses a count of ranks that is not a whole number from 1 to maxEngineRanks, and a rank left no port, before it connects', async () => {
    const connect = spied(vi.spyOn(Subscriber.prototype, 'connect'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const options = { engine: 'engine-g', endpoint: 'tcp://10.0.0.5:65000', feed };
    expect(maxEngineRanks).toBe(1024);
    for (const ranks of [0, 1.5, Number.NaN])
      await expect(subscribeEngineRanks({ ...options, ranks })).rejects.toThrow(
        expect.objectContaining({
          code: 'ENGINE_EVENTS_INVALID_INPUT',
          argument: 'options.ranks',
          reason: 'a number of ranks is a whole number from 1 to 1024',
        }),
      );
    await expect(subscribeEngineRanks({ ...options, ranks: 537 })).rejects.toThrow(
      expect.objectContaining({ name: 'RankPortError', rank: 536 }),
    );
    expect(connect).not.toHaveBeenCalled();
  });
});

describe('EngineEventSubscriber given options of another type', () => {
  it('refuses each, naming it, before it connects', () => {
    const connect = spied(vi.spyOn(Subscriber.prototype, 'connect'));
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const valid = { endpoint: 'inproc://engine-d', workerId: 'engine-d/dp0', feed };
    for (const [argument, wrong] of [
      ['options.topic', { topic: 5 }],
      ['options.feed', { feed: undefined }],
      ['options.feed', { feed: { apply: () => {}, restart: () => true } }],
      ['options.onEvent', { onEvent: 'log' }],
      ['options.now', { now: 0 }],
      ['options.replayTimeoutMs', { replayTimeoutMs: 2 ** 31 }],
      ['options.replayTimeoutMs', { replayTimeoutMs: 2 ** 40 }],
    ] as const)
      expect(() => new EngineEventSubscriber({ ...valid, ...wrong } as never)).toThrow(
        expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument }),
      );
    expect(connect).not.toHaveBeenCalled();
  });
});
