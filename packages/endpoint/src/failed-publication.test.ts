// A ReuseEndpoint whose publication fails on its own (no close called): what it gives back, and how long it
// waits for that before publish() rejects.
import { type DiscoveryWatch, MemoryDiscoveryStore } from '@kvreuse/discovery';
import { describe, expect, it, vi } from 'vitest';
import { publishedKeys, storeWith } from '../test/support/discovery-stores.js';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { openWorker } from '../test/support/endpoint-workers.js';
import { nextTurn } from '../test/support/next-turn.js';
import { defaultSettings } from '../test/support/settings.js';
import { deferred } from './deferred.js';
import { PublicationRollbackError } from './endpoint-publication.js';
import { SourceSide } from './source-side.js';

const { cleanups, own } = cleanupsAfterEach();

/** What the rollback of a failed publication is left hanging on, and how each is made to hang. */
const hangs = {
  'the readiness watch': {
    named: 'the readiness watch did not close: the deadline passed first',
    store: (store: MemoryDiscoveryStore, began: () => void) =>
      storeWith(store, {
        watch: async (...args) => {
          const watch: DiscoveryWatch = await store.watch(...args);
          cleanups.push(() => watch.close());
          return {
            prefix: watch.prefix,
            revision: watch.revision,
            close: () => {
              began();
              return new Promise<void>(() => undefined);
            },
          };
        },
      }),
  },
  'the inventory withdrawal': {
    named: 'the inventory was not withdrawn: the deadline passed first',
    store: (store: MemoryDiscoveryStore, began: () => void) => {
      own(vi.spyOn(SourceSide.prototype, 'withdrawInventory')).mockImplementation(() => {
        began();
        return new Promise<void>(() => undefined);
      });
      return store;
    },
  },
} as const;

describe('ReuseEndpoint.publish() failing on its own', () => {
  it('rejects with its own error once all it published is given back', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const worker = await openWorker(store, { workerId: 'decode-0', role: 'decode', tpSize: 1, serve: true }, cleanups);
    const { endpoint } = worker.ranks[0]!;
    const failure = new Error('inventory store is down');
    own(vi.spyOn(SourceSide.prototype, 'publishInventory')).mockRejectedValueOnce(failure);
    await endpoint.register();
    await expect(endpoint.publish()).rejects.toBe(failure);
    expect(endpoint.state).toBe('registered');
    expect(await publishedKeys(store)).toEqual([]);
  });

  it.each(Object.keys(hangs) as (keyof typeof hangs)[])(
    'rejects with PublicationRollbackError, its own (frozen) error the cause, once all of transport.shutdownDeadlineMs passed, not before, although %s never settles, its rollbackError naming it; the rest is withdrawn',
    async (hanging) => {
      const store = new MemoryDiscoveryStore();
      cleanups.push(() => store.close());
      const rollbackBegan = deferred<void>();
      const rankPartWithdrawn = deferred<void>();
      const held = storeWith(
        hangs[hanging].store(store, () => rollbackBegan.resolve()),
        {
          revokeLease: async (lease) => {
            await store.revokeLease(lease);
            rankPartWithdrawn.resolve();
          },
        },
      );
      const worker = await openWorker(held, { workerId: 'decode-0', role: 'decode', tpSize: 1, serve: true }, cleanups);
      const { endpoint } = worker.ranks[0]!;
      // Frozen: nothing can be added to it, and nothing is lost for that.
      const failure = Object.freeze(new Error('inventory store is down'));
      own(vi.spyOn(SourceSide.prototype, 'publishInventory')).mockRejectedValueOnce(failure);
      await endpoint.register();
      let settled = false;
      const rejected = endpoint
        .publish()
        .then(
          () => undefined,
          (error: unknown) => error,
        )
        .finally(() => (settled = true));
      await rollbackBegan.promise;
      await rankPartWithdrawn.promise;
      // The withdrawal's own reactions to the revoked lease run before the deadline is forced.
      await nextTurn();
      worker.clock.advance(defaultSettings.transport.shutdownDeadlineMs - 1);
      await nextTurn();
      expect(settled).toBe(false);
      worker.clock.advance(1);
      const error = await rejected;
      expect(error).toBeInstanceOf(PublicationRollbackError);
      const rollbackError = new AggregateError([new Error('the deadline passed first')], hangs[hanging].named);
      expect(error).toEqual(new PublicationRollbackError(failure, rollbackError));
      expect(error).toMatchObject({
        code: 'PUBLICATION_NOT_ROLLED_BACK',
        message: `the publication failed (inventory store is down) and was not all given back: ${hangs[hanging].named}`,
      });
      const { cause, rollbackError: carried } = error as PublicationRollbackError;
      expect(cause).toBe(failure);
      expect(carried).toBeInstanceOf(AggregateError);
      expect(carried).toEqual(rollbackError);
      expect(endpoint.state).toBe('registered');
      expect(await publishedKeys(store)).toEqual([]);
    },
  );
});
