// A ReuseEndpoint once close() is called, between real loopback agents in this process: what it refuses,
// and what the close stops rather than waits for.
import { describe, expect, it } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { chain, hintFor, servingPair, type TestWorker } from '../test/support/endpoint-workers.js';
import { EndpointStateError } from './lifecycle.js';
import type { ReuseEndpoint } from './reuse-endpoint.js';

const cleanups = cleanupsAfterEach();

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
});
