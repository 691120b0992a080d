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
import { SourceSide } from './source-side.js';

const cleanups = cleanupsAfterEach();

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
      vi.spyOn(SourceSide.prototype, 'withdrawInventory').mockImplementation(() => {
        began();
        return new Promise<void>(() => undefined);
      });
      return store;
    },
  },
} as const;

describe('ReuseEndpoint.publish() failing on its own', () => {
  it.each(Object.keys(hangs) as (keyof typeof hangs)[])(
    'rejects with its own error once transport.shutdownDeadlineMs passed although %s never settles, its rollbackError naming it; the rest is withdrawn',
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
      const failure = new Error('inventory store is down');
      vi.spyOn(SourceSide.prototype, 'publishInventory').mockRejectedValueOnce(failure);
      await endpoint.register();
      const rejected = endpoint.publish().then(
        () => undefined,
        (error: unknown) => error,
      );
      await rollbackBegan.promise;
      await rankPartWithdrawn.promise;
      // The withdrawal's own reactions to the revoked lease run before the deadline is forced.
      await nextTurn();
      worker.clock.advance(defaultSettings.transport.shutdownDeadlineMs);
      const error = await rejected;
      expect(error).toBe(failure);
      const { rollbackError } = error as { rollbackError?: unknown };
      expect(rollbackError).toBeInstanceOf(AggregateError);
      expect(rollbackError).toEqual(new AggregateError([new Error('the deadline passed first')], hangs[hanging].named));
      expect(endpoint.state).toBe('registered');
      expect(await publishedKeys(store)).toEqual([]);
    },
  );
});
