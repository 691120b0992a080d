// A serving ReuseEndpoint's source side between real loopback agents in this process: its inventory,
// and its shutdown while a reader holds pins and reads (the ordering forced by held completions).
import {
  claimIncarnationEpoch,
  MemoryDiscoveryStore,
  watchWorkerReadiness,
  workerPartsPrefix,
  type WorkerReadiness,
} from '@kvreuse/discovery';
import { defaultInventoryPrefix, safeParseInventoryBatch } from '@kvreuse/inventory';
import type { Agent } from '@kvreuse/native-bindings';
import { describe, expect, it, vi } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { loopbackPins } from '../test/support/loopback-pins.js';
import { deferred } from './deferred.js';
import type { PinAdapter } from './pin-adapter.js';
import { PeerTemplates } from './peer-templates.js';
import { RemotePeers } from './remote-peers.js';
import type { ReuseEndpoint } from './reuse-endpoint.js';
import { SourceSide } from './source-side.js';
import { allReady, chain, hintFor, openWorker, servingPair } from '../test/support/endpoint-workers.js';

const { cleanups, own } = cleanupsAfterEach();

describe('ReuseEndpoint serving pins', () => {
  it('publishes its retained inventory, complete, once published, follows evictions, renews it, and withdraws it first at drain', async () => {
    const { store, decode } = await servingPair(cleanups);
    const key = `${defaultInventoryPrefix}decode-0`;
    const entry = await store.get(key);
    const batch = safeParseInventoryBatch(entry!.value);
    expect(batch.success && batch.data).toMatchObject({
      workerId: 'decode-0',
      incarnation: decode.identity.incarnation,
      complete: true,
      events: [{ type: 'stored', tier: 'host', blocks: BigUint64Array.from(chain) }],
    });
    // An evicted block is announced removed; at half the TTL everything retained is announced again.
    const pool = decode.ranks[0]!.pool;
    pool.commit(pool.allocate(), 0x2000n);
    const latest = async () => {
      const stored = safeParseInventoryBatch((await store.get(key))!.value);
      return stored.success ? stored.data : undefined;
    };
    await vi.waitFor(
      async () =>
        expect(await latest()).toMatchObject({
          seq: 1,
          complete: true,
          events: [{ type: 'removed', tier: 'host', blocks: BigUint64Array.of(chain[0]!) }],
        }),
      { timeout: 20_000, interval: 5 },
    );
    decode.clock.advance(1_800_000);
    await vi.waitFor(
      async () =>
        expect(await latest()).toMatchObject({
          seq: 2,
          complete: true,
          events: [{ type: 'stored', blocks: BigUint64Array.from([...chain.slice(1), 0x2000n]) }],
        }),
      { timeout: 20_000, interval: 5 },
    );

    const report = await decode.ranks[0]!.endpoint.drain({ deadlineMs: 60_000 });
    expect(await store.get(key)).toBeUndefined();
    expect(report.steps.slice(0, 2).map(({ step }) => step)).toEqual(['withdraw-rank-parts', 'withdraw-inventory']);
    expect(report.pins).toEqual([]);
  });

  /** A ready TP 1 serving rank without `serve.inventory`: it announces its inventory itself. `beforeRegister` sees it created. */
  async function announcingRank(beforeRegister?: (endpoint: ReuseEndpoint) => Promise<void>) {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const decode = await openWorker(
      store,
      { workerId: 'decode-0', role: 'decode', tpSize: 1, serve: true, inventory: false },
      cleanups,
    );
    const { endpoint } = decode.ranks[0]!;
    await beforeRegister?.(endpoint);
    await endpoint.register();
    await endpoint.publish();
    await allReady(decode);
    return { store, decode, endpoint, key: `${defaultInventoryPrefix}decode-0` };
  }

  it('announces the inventory a ready serving rank retains, under a lease of its own, and withdraws it and revokes the lease at drain', async () => {
    const { store, decode, endpoint, key } = await announcingRank(async (created) => {
      await expect(created.announceInventory([chain[0]!], { tier: 'host', ttlMs: 600_000 })).rejects.toMatchObject({
        code: 'ILLEGAL_ENDPOINT_STATE',
      });
    });
    expect(await store.get(key)).toBeUndefined();
    const grantLease = own(vi.spyOn(store, 'grantLease'));
    const revokeLease = own(vi.spyOn(store, 'revokeLease'));
    await endpoint.announceInventory(chain.slice(0, 3), { tier: 'host', ttlMs: 600_000 });
    await endpoint.announceInventory(chain, { tier: 'host', ttlMs: 600_000 });
    expect(grantLease).toHaveBeenCalledOnce();
    const batch = safeParseInventoryBatch((await store.get(key))!.value);
    expect(batch.success && batch.data).toMatchObject({
      workerId: 'decode-0',
      incarnation: decode.identity.incarnation,
      epoch: endpoint.epoch,
      complete: true,
      events: [{ type: 'stored', tier: 'host', blocks: BigUint64Array.from(chain) }],
    });
    await expect(endpoint.announceInventory([1 as never], { tier: 'host', ttlMs: 600_000 })).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'blocks',
    });
    await endpoint.drain({ deadlineMs: 60_000 });
    expect(await store.get(key)).toBeUndefined();
    expect(revokeLease).toHaveBeenCalledWith((await grantLease.mock.results[0]!.value).id);
  });

  it('announces what it was given: the caller changing the blocks or the options once announceInventory() was called changes nothing', async () => {
    const { store, endpoint, key } = await announcingRank();
    const blocks = chain.slice(0, 3);
    const options = { tier: 'host' as const, ttlMs: 600_000 };
    const announcing = endpoint.announceInventory(blocks, options);
    blocks.splice(0);
    Object.assign(options, { tier: 'gpu', ttlMs: Number.NaN });
    await announcing;
    const batch = safeParseInventoryBatch((await store.get(key))!.value);
    expect(batch.success && batch.data).toMatchObject({
      events: [{ type: 'stored', tier: 'host', blocks: BigUint64Array.from(chain.slice(0, 3)) }],
    });
  });

  it('two announcements at once share one lease: the later one is the inventory', async () => {
    const { store, endpoint, key } = await announcingRank();
    const grantLease = own(vi.spyOn(store, 'grantLease'));
    await Promise.all([
      endpoint.announceInventory(chain.slice(0, 3), { tier: 'host', ttlMs: 600_000 }),
      endpoint.announceInventory(chain, { tier: 'host', ttlMs: 600_000 }),
    ]);
    expect(grantLease).toHaveBeenCalledOnce();
    const batch = safeParseInventoryBatch((await store.get(key))!.value);
    expect(batch.success && batch.data).toMatchObject({
      seq: 1,
      events: [{ type: 'stored', blocks: BigUint64Array.from(chain) }],
    });
    const revokeLease = own(vi.spyOn(store, 'revokeLease'));
    await endpoint.drain({ deadlineMs: 60_000 });
    expect(revokeLease).toHaveBeenCalledWith((await grantLease.mock.results[0]!.value).id);
  });

  it('an announcement whose lease the store refuses rejects with its error; the next one asks for a lease again', async () => {
    const { store, endpoint, key } = await announcingRank();
    const grantLease = own(vi.spyOn(store, 'grantLease')).mockRejectedValueOnce(new Error('the store is read-only'));
    await expect(endpoint.announceInventory(chain, { tier: 'host', ttlMs: 600_000 })).rejects.toThrow(
      'the store is read-only',
    );
    expect(await store.get(key)).toBeUndefined();
    await endpoint.announceInventory(chain, { tier: 'host', ttlMs: 600_000 });
    expect(grantLease).toHaveBeenCalledTimes(2);
    expect(await store.get(key)).toBeDefined();
  });

  it('an announcement whose lease is still being granted when the drain withdraws the inventory: nothing is left published, its lease is revoked', async () => {
    const { store, endpoint, key } = await announcingRank();
    const grant = store.grantLease.bind(store);
    let letGrant = (): void => undefined;
    const grantLease = own(vi.spyOn(store, 'grantLease')).mockImplementation(
      (ttlMs) => new Promise((resolve) => (letGrant = () => resolve(grant(ttlMs)))),
    );
    const revokeLease = own(vi.spyOn(store, 'revokeLease'));
    const announcing = endpoint.announceInventory(chain, { tier: 'host', ttlMs: 600_000 });
    await vi.waitFor(() => expect(grantLease).toHaveBeenCalledOnce(), { timeout: 20_000, interval: 5 });
    // The lease is granted once the drain's inventory step has begun.
    const withdraw = SourceSide.prototype.withdrawInventory;
    own(vi.spyOn(SourceSide.prototype, 'withdrawInventory')).mockImplementation(function (this: SourceSide) {
      const withdrawn = withdraw.call(this);
      letGrant();
      return withdrawn;
    });
    await endpoint.drain({ deadlineMs: 60_000 });
    await announcing;
    expect(await store.get(key)).toBeUndefined();
    expect(revokeLease).toHaveBeenCalledWith((await grantLease.mock.results[0]!.value).id);
  });

  it('a publication that fails while it starts serving leaves the rank registered with nothing published, and can be retried', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const decode = await openWorker(store, { workerId: 'decode-0', role: 'decode', tpSize: 1, serve: true }, cleanups);
    const rank = decode.ranks[0]!;
    await rank.endpoint.register();
    const retained = rank.pool.retained.bind(rank.pool);
    rank.pool.retained = () => {
      throw new Error('the framework lost its block table');
    };
    await expect(rank.endpoint.publish()).rejects.toThrow('the framework lost its block table');
    expect(rank.endpoint.state).toBe('registered');
    expect((await store.list(workerPartsPrefix('decode-0'))).entries).toEqual([]);
    expect(await store.get(`${defaultInventoryPrefix}decode-0`)).toBeUndefined();
    rank.pool.retained = retained;
    await rank.endpoint.publish();
    await allReady(decode);
    expect(await store.get(`${defaultInventoryPrefix}decode-0`)).toBeDefined();
  });

  it('a source shutting down while a reader holds pins and reads: not ready before its first deregistration, nothing deregistered until the pins are released, and the bytes verify', async () => {
    const { store, decode, reader } = await servingPair(cleanups);
    const source = decode.ranks[0]!;
    const registrations = () => source.agent.counters().liveRegistrations;
    const banks = registrations();
    expect(banks).toBeGreaterThan(0);
    const seen: { readiness: WorkerReadiness; registrations: number }[] = [];
    const watch = await watchWorkerReadiness(store, 'decode-0', {
      onChange: (readiness) => seen.push({ readiness, registrations: registrations() }),
    });
    cleanups.push(() => watch.close());
    const releases: number[] = [];
    const releasePin = source.pool.releasePin.bind(source.pool);
    source.pool.releasePin = (pinId) => {
      releases.push(registrations());
      releasePin(pinId);
    };

    reader.agent.faults.delayCompletions('forever');
    const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: Uint32Array.of(0, 1, 2, 3) });
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBe(2), { timeout: 20_000, interval: 5 });
    expect(source.endpoint.pinServer?.heldPins).toBe(1);

    let drained = false;
    const draining = source.endpoint.drain({ deadlineMs: 600_000 }).finally(() => (drained = true));
    // The worker turns not ready (its rank part withdrawn) while every bank is still registered.
    await vi.waitFor(() => expect(seen.at(-1)?.readiness.ready).toBe(false), { timeout: 20_000, interval: 5 });
    expect(seen.at(-1)).toMatchObject({ readiness: { ready: false, workerId: 'decode-0' }, registrations: banks });
    await vi.waitFor(() => expect(source.transitions.at(-1)?.to).toBe('draining'), { timeout: 20_000, interval: 5 });
    // While the reader's pin is held the drain waits: nothing deregistered, the drain not done.
    await watch.settled();
    expect(registrations()).toBe(banks);
    expect(drained).toBe(false);
    expect(source.endpoint.pinServer?.heldPins).toBe(1);

    reader.agent.faults.clear();
    const receipt = await pulling;
    expect(receipt).toMatchObject({
      requested: 4,
      blocks: 4,
      checkedBlocks: 4,
      recomputed: { blocks: 0, reasons: [] },
    });
    const report = await draining;
    expect(releases).toEqual([banks]);
    expect(registrations()).toBe(0);
    expect(report.readers).toEqual({ released: 1, lapsed: 0, outstanding: 0 });
    expect(report.pins).toMatchObject([{ readerAgent: reader.agent.name, blocks: 4, ended: 'released' }]);
    expect(report.banksReturned).toHaveLength(banks);
    const steps = report.steps.map(({ step }) => step);
    expect(steps.indexOf('withdraw-rank-parts')).toBeLessThan(steps.indexOf('wait-for-readers'));
    expect(steps.indexOf('wait-for-readers')).toBeLessThan(steps.indexOf('deregister'));
  });
});

describe('SourceSide', () => {
  it('leaves no eviction listener subscribed when its inventory is withdrawn while its first announcement is being written', async () => {
    const agents: Agent[] = [];
    cleanups.push(() => Promise.all(agents.map((agent) => agent.close())));
    const { sourceAgent, sourceChannel, secret, pool, clock } = await loopbackPins('source-side', agents);
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const worker = { workerId: 'decode-0', incarnation: 'inc-1' };
    const { epoch } = await claimIncarnationEpoch(store, worker);
    const lease = await store.grantLease(60_000);
    // The inventory's first write reaches the store once the test lets it.
    const writeAsked = deferred<void>();
    const writeLet = deferred<void>();
    const commit = store.commit.bind(store);
    own(vi.spyOn(store, 'commit')).mockImplementationOnce(async (...args) => {
      writeAsked.resolve();
      await writeLet.promise;
      return commit(...args);
    });
    let subscribed = 0;
    const adapter: PinAdapter = {
      requestPin: pool.requestPin.bind(pool),
      renewPin: pool.renewPin.bind(pool),
      releasePin: pool.releasePin.bind(pool),
      cancelPin: pool.cancelPin.bind(pool),
      onEvicted: (listener) => {
        subscribed++;
        const unsubscribe = pool.onEvicted(listener);
        return () => {
          subscribed--;
          unsubscribe();
        };
      },
    };
    const side = new SourceSide({
      agent: sourceAgent,
      channel: sourceChannel,
      discovery: store,
      secret,
      serve: { adapter, inventory: { tier: 'host', retained: () => pool.retained(), ttlMs: 600_000 } },
      source: { ...worker, epoch, rank: { tpRank: 0, ppRank: 0 } },
      bankBytes: [],
      leaseMs: 1000,
      lease: lease.id,
      clock,
      templates: new PeerTemplates(sourceAgent),
      remotePeers: new RemotePeers(sourceAgent, () => undefined),
    });
    const publishing = side.publishInventory();
    await writeAsked.promise;
    const withdrawing = side.withdrawInventory();
    writeLet.resolve();
    await Promise.all([publishing, withdrawing]);
    expect(subscribed).toBe(0);
    expect(await store.get(`${defaultInventoryPrefix}decode-0`)).toBeUndefined();
  });
});
