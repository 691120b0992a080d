// A ReuseEndpoint once close() is called, between real loopback agents in this process: what it refuses,
// and what the close stops rather than waits for.
import { type DiscoveryWatch, MemoryDiscoveryStore } from '@kvreuse/discovery';
import { describe, expect, it } from 'vitest';
import { publishedKeys, storeWith } from '../test/support/discovery-stores.js';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { chain, hintFor, openWorker, servingPair, start, type TestWorker } from '../test/support/endpoint-workers.js';
import { nextTurn } from '../test/support/next-turn.js';
import { deferred } from './deferred.js';
import { type EndpointState, EndpointStateError } from './lifecycle.js';
import type { ReuseEndpoint } from './reuse-endpoint.js';

const { cleanups } = cleanupsAfterEach();

/** Each transfer or announcement a ready endpoint takes, started on `reader` (the prefill rank) or `server` (decode rank 1, which announces its own inventory). */
const startedOnceClosing: Record<
  'pull' | 'push' | 'announceInventory',
  (ranks: { reader: ReuseEndpoint; server: ReuseEndpoint; decode: TestWorker }) => Promise<unknown>
> = {
  pull: ({ reader, decode }) =>
    reader.pull({ hint: hintFor(decode, 4), destinationBlocks: Uint32Array.of(0, 1, 2, 3) }),
  push: ({ reader }) =>
    reader.push({ workerId: 'decode-0', sourceBlocks: Uint32Array.of(0), destinationBlocks: Uint32Array.of(1) }),
  announceInventory: ({ server }) => server.announceInventory([chain[0]!], { tier: 'host', ttlMs: 600_000 }),
};

describe('ReuseEndpoint once close() is called', () => {
  it.each(['pull', 'push', 'announceInventory'] as const)(
    'refuses a %s() started while it is still ready, naming closing: nothing is pinned or posted',
    async (operation) => {
      const { decode, reader, pinsHeld } = await servingPair(cleanups);
      const ranks = { reader: reader.endpoint, server: decode.ranks[1]!.endpoint, decode };
      const posted: unknown[] = [];
      reader.endpoint.ledger.on('posted', (posting) => posted.push(posting));
      const closing = [reader.endpoint.close(), ranks.server.close()];
      expect([ranks.reader.state, ranks.server.state]).toEqual(['ready', 'ready']);
      await expect(startedOnceClosing[operation](ranks)).rejects.toThrow(
        new EndpointStateError(operation, 'closing', ['ready']),
      );
      await Promise.all(closing);
      expect(posted).toEqual([]);
      expect(pinsHeld()).toEqual([0, 0]);
    },
  );

  /**
   * Closes `endpoint`, calling `operation` (with `ranks`) right after the call and at every transition the close
   * makes: each is refused with EndpointStateError naming closing, and closed once it is. Answers the states it
   * called it in.
   */
  async function refusedWhileClosing(
    endpoint: ReuseEndpoint,
    operation: keyof typeof startedOnceClosing,
    ranks: { reader: ReuseEndpoint; server: ReuseEndpoint; decode: TestWorker },
  ): Promise<EndpointState[]> {
    const states: EndpointState[] = [];
    const refusals: Promise<unknown>[] = [];
    const refused = (state: EndpointState) => {
      states.push(state);
      const named = state === 'closed' ? 'closed' : 'closing';
      const called = startedOnceClosing[operation](ranks);
      refusals.push(
        expect(called).rejects.toThrow(new EndpointStateError(operation, named, ['ready'])),
        expect(called).rejects.toBeInstanceOf(EndpointStateError),
      );
    };
    endpoint.onTransition(({ to }) => refused(to));
    const closing = endpoint.close();
    refused(endpoint.state);
    await closing;
    await Promise.all(refusals);
    return states;
  }

  it.each([
    ['pull', 'reader'],
    ['push', 'reader'],
    ['announceInventory', 'server'],
  ] as const)(
    'refuses a %s() at every stage a close reaches, naming closing, then closed: nothing is pinned, posted or announced',
    async (operation, closed) => {
      const { store, decode, reader, pinsHeld } = await servingPair(cleanups);
      const ranks = { reader: reader.endpoint, server: decode.ranks[1]!.endpoint, decode };
      const posted: unknown[] = [];
      ranks[closed].ledger.on('posted', (posting) => posted.push(posting));
      const inventory = async () => (await store.list('kvreuse/inventory/')).entries;
      const inventoryBefore = await inventory();
      expect(await refusedWhileClosing(ranks[closed], operation, ranks)).toEqual([
        'ready',
        'draining',
        'drained',
        'closing',
        'closed',
      ]);
      expect(posted).toEqual([]);
      expect(pinsHeld()).toEqual([0, 0]);
      expect(await inventory()).toEqual(inventoryBefore);
    },
  );

  it('refuses a pull() at every stage the close of an endpoint never registered, or drained, reaches', async () => {
    const { store, decode, reader, pinsHeld } = await servingPair(cleanups);
    const prefillRank = async (workerId: string) =>
      (await openWorker(store, { workerId, role: 'prefill', tpSize: 1 }, cleanups)).ranks[0]!.endpoint;
    const never = await prefillRank('prefill-1');
    const server = decode.ranks[1]!.endpoint;
    expect(await refusedWhileClosing(never, 'pull', { reader: never, server, decode })).toEqual([
      'created',
      'closing',
      'closed',
    ]);
    const drained = await prefillRank('prefill-2');
    await drained.register();
    await drained.publish();
    await drained.drain({ deadlineMs: 1_000 });
    expect(await refusedWhileClosing(drained, 'pull', { reader: drained, server, decode })).toEqual([
      'drained',
      'closing',
      'closed',
    ]);
    expect(pinsHeld()).toEqual([0, 0]);
    expect(reader.endpoint.state).toBe('ready');
  });

  /** A ready prefill rank of TP 1 over `store` (whose readiness watch the test may answer), and its worker. */
  async function readyPrefill(store: MemoryDiscoveryStore) {
    const worker = await openWorker(store, { workerId: 'prefill-0', role: 'prefill', tpSize: 1 }, cleanups);
    await start(worker);
    return { worker, endpoint: worker.ranks[0]!.endpoint };
  }

  /** `store.watch`, each watch's close answered by `close`, given the store's own watch. */
  const watchClosedBy =
    (store: MemoryDiscoveryStore, close: (watch: DiscoveryWatch) => Promise<void>) =>
    async (...args: Parameters<MemoryDiscoveryStore['watch']>): Promise<DiscoveryWatch> => {
      const watch = await store.watch(...args);
      return { prefix: watch.prefix, revision: watch.revision, close: () => close(watch) };
    };

  /** `store`, each deletion of a whole commit (the rank part's withdrawal) answered by `commit`. */
  const deletionsBy = (
    store: MemoryDiscoveryStore,
    commit: (...args: Parameters<MemoryDiscoveryStore['commit']>) => ReturnType<MemoryDiscoveryStore['commit']>,
  ) => ({
    commit: (...args: Parameters<MemoryDiscoveryStore['commit']>) =>
      args[0].every(({ type }) => type === 'delete') ? commit(...args) : store.commit(...args),
  });

  it.each([
    {
      hanging: "the readiness watch's close",
      named: 'the readiness watch did not close: the deadline passed first',
      publishedAtTheDeadline: 0,
      // The readiness watch (this rank's only one) never answers its close; the store's own watch is closed at the end.
      hang: (store: MemoryDiscoveryStore, began: (finish: () => Promise<unknown>) => void) => ({
        watch: watchClosedBy(store, (watch) => {
          began(() => watch.close());
          return new Promise<void>(() => undefined);
        }),
      }),
    },
    {
      hanging: "the rank part's withdrawal",
      named: 'the rank part was not withdrawn: the deadline passed first',
      publishedAtTheDeadline: 1,
      // The rank part's deletion is held; it is made once the test is over, so that its lease is revoked.
      hang: (store: MemoryDiscoveryStore, began: (finish: () => Promise<unknown>) => void) =>
        deletionsBy(store, (...args) => {
          const answer = deferred<void>();
          began(async () => answer.resolve());
          return answer.promise.then(() => store.commit(...args));
        }),
    },
  ])(
    "withdraws the rest although $hanging never settles, and the step's report names it once the deadline passed",
    async ({ hang, named, publishedAtTheDeadline }) => {
      const store = new MemoryDiscoveryStore();
      cleanups.push(() => store.close());
      const hung = deferred<() => Promise<unknown>>();
      const held = storeWith(
        store,
        hang(store, (finish) => hung.resolve(finish)),
      );
      const { worker, endpoint } = await readyPrefill(held);
      expect(endpoint.state).toBe('ready');
      expect(await publishedKeys(store)).toHaveLength(1);
      const closing = endpoint.close({ deadlineMs: 1_000 });
      const finish = await hung.promise;
      // The other part's withdrawal, all in this process, ends before the deadline is forced.
      await nextTurn();
      expect(await publishedKeys(store)).toHaveLength(publishedAtTheDeadline);
      worker.clock.advance(1_000);
      const closed = await closing;
      expect(closed.report.steps.find(({ step }) => step === 'withdraw-rank-parts')).toMatchObject({
        outcome: 'failed',
        error: named,
      });
      expect(closed).toMatchObject({ agentDestroyed: true, banksRetained: [] });
      await finish();
    },
  );

  it("reports the readiness watch's close and the rank part's withdrawal each when both fail", async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const held = storeWith(store, {
      watch: watchClosedBy(store, async (watch) => {
        await watch.close();
        throw new Error('watch close lost');
      }),
      ...deletionsBy(store, () => Promise.reject(new Error('store is down'))),
      revokeLease: () => Promise.reject(new Error('lease revoke lost')),
    });
    const { endpoint } = await readyPrefill(held);
    const closed = await endpoint.close({ deadlineMs: 1_000 });
    expect(closed.report.steps.find(({ step }) => step === 'withdraw-rank-parts')).toMatchObject({
      outcome: 'failed',
      error: 'the readiness watch did not close: watch close lost; the rank part was not withdrawn: store is down',
    });
    expect(closed).toMatchObject({ agentDestroyed: true, banksRetained: [] });
  });
});
