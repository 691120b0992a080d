// ReuseEndpoint.push between real loopback agents in this process: a prefill worker of TP 1 writes its
// blocks into both ranks of a decode worker of TP 2 (each receives its half of the KV heads).
import { buildTransferTemplate } from '@kvreuse/descriptors';
import { DrainController } from '@kvreuse/drain';
import { codeOf } from '@kvreuse/errors';
import { describe, expect, it, vi } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { openWorker, servingPair } from '../test/support/endpoint-workers.js';
import { blockChecksums } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';
import { EndpointStateError } from './lifecycle.js';

const { cleanups, own } = cleanupsAfterEach();

describe('ReuseEndpoint.push', () => {
  it("writes the blocks into every destination rank's places, each post on the ledger, one template per rank pair", async () => {
    const { decode, reader } = await servingPair(cleanups);
    const registerTemplate = own(vi.spyOn(reader.agent, 'registerTemplate'));
    const posted: unknown[] = [];
    reader.endpoint.ledger.on('posted', (operation) => posted.push(operation));
    const sourceBlocks = Uint32Array.of(0, 1, 2);
    const destinationBlocks = Uint32Array.of(5, 6, 7);
    const receipt = await reader.endpoint.push({ workerId: 'decode-0', sourceBlocks, destinationBlocks });
    expect(receipt).toMatchObject({ blocks: 3 });
    expect(posted).toHaveLength(3 * 2);

    const prefillWorker = reader.endpoint.readyRank.readiness.worker;
    const decodeWorker = decode.ranks[0]!.endpoint.readyRank.readiness.worker;
    const template = buildTransferTemplate(prefillWorker, decodeWorker);
    expect(receipt.bytes).toBe(3 * Number(template.blockBytes));
    template.pairs.forEach((route, pair) => {
      const destination = decode.ranks[route.destinationRank.tpRank]!;
      const sent = blockChecksums(template, pair, 'source', reader.endpoint.bankBytes!, sourceBlocks);
      expect(blockChecksums(template, pair, 'destination', destination.endpoint.bankBytes!, destinationBlocks)).toEqual(
        sent,
      );
    });
    // The same pairs again: the templates registered for the first push are reused.
    await reader.endpoint.push({ workerId: 'decode-0', sourceBlocks, destinationBlocks });
    expect(registerTemplate).toHaveBeenCalledTimes(2);
    expect(registerTemplate.mock.calls.every(([options]) => options.direction === 'write')).toBe(true);
  });

  it('writes the blocks it was given: the caller changing its block lists once push() was called changes nothing', async () => {
    const { reader } = await servingPair(cleanups);
    const destinationBlocks = Uint32Array.of(5, 6, 7);
    const pushed = reader.endpoint.push({
      workerId: 'decode-0',
      sourceBlocks: Uint32Array.of(0, 1, 2),
      destinationBlocks,
    });
    destinationBlocks[2] = 0xffff_fff0;
    expect(await pushed).toMatchObject({ blocks: 3 });
  });

  it('refuses a block outside the banks or a destination block named twice before writing any block', async () => {
    const { reader } = await servingPair(cleanups);
    const posted: unknown[] = [];
    reader.endpoint.ledger.on('posted', (operation) => posted.push(operation));
    const push = (sourceBlocks: Uint32Array, destinationBlocks: Uint32Array) =>
      reader.endpoint.push({ workerId: 'decode-0', sourceBlocks, destinationBlocks });
    await expect(push(Uint32Array.of(0, 1, 2), Uint32Array.of(5, 6, 8))).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.destinationBlocks',
      rule: expect.stringMatching(/^destination block 8 \(block list index 2\) is outside bank 0 of rank/),
    });
    await expect(push(Uint32Array.of(0, 9), Uint32Array.of(5, 6))).rejects.toMatchObject({
      option: 'request.sourceBlocks',
    });
    await expect(push(Uint32Array.of(0, 1), Uint32Array.of(5, 5))).rejects.toMatchObject({
      option: 'request.destinationBlocks',
      rule: expect.stringContaining('destination block 5 is written twice'),
    });
    expect(posted).toEqual([]);
  });

  it('validates the block lists once, refuses while not ready, and fails naming a destination that is not ready', async () => {
    const { store, reader } = await servingPair(cleanups);
    await expect(
      reader.endpoint.push({
        workerId: 'decode-0',
        sourceBlocks: Uint32Array.of(0, 1),
        destinationBlocks: Uint32Array.of(0),
      }),
    ).rejects.toThrow(EndpointOptionError);
    await expect(
      reader.endpoint.push({
        workerId: 'decode-0',
        sourceBlocks: [0] as unknown as Uint32Array,
        destinationBlocks: Uint32Array.of(0),
      }),
    ).rejects.toThrow(EndpointOptionError);
    const missing = await reader.endpoint
      .push({ workerId: 'nobody', sourceBlocks: Uint32Array.of(0), destinationBlocks: Uint32Array.of(0) })
      .catch((error: unknown) => error);
    expect(codeOf(missing)).toBe('PUSH_FAILED');
    expect((missing as Error).message).toMatch(/^push to nobody failed: it is not ready: /);
    const idle = await openWorker(store, { workerId: 'prefill-1', role: 'prefill', tpSize: 1 }, cleanups);
    await expect(
      idle.ranks[0]!.endpoint.push({
        workerId: 'decode-0',
        sourceBlocks: Uint32Array.of(0),
        destinationBlocks: Uint32Array.of(0),
      }),
    ).rejects.toThrow(EndpointStateError);
  });

  it('a drain waits for a push in flight: every block is written before the drain goes on', async () => {
    const { reader } = await servingPair(cleanups);
    reader.agent.faults.delayCompletions('forever');
    const pushing = reader.endpoint.push({
      workerId: 'decode-0',
      sourceBlocks: Uint32Array.of(0, 1, 2),
      destinationBlocks: Uint32Array.of(5, 6, 7),
    });
    // The first block's WRITEs (one per destination rank) are posted and held.
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBe(2), { timeout: 20_000, interval: 5 });
    const seen: string[] = [];
    const goOn = DrainController.prototype.drain;
    own(vi.spyOn(DrainController.prototype, 'drain')).mockImplementation(function (
      this: DrainController<never>,
      options,
    ) {
      seen.push(`the drain goes on, ${reader.endpoint.ledger.counts().posted} WRITEs posted`);
      return goOn.call(this, options);
    });
    void pushing.then(() => seen.push('the push returned'));
    const draining = reader.endpoint.drain({ deadlineMs: 60_000 });
    reader.agent.faults.clear();
    expect(await pushing).toMatchObject({ blocks: 3 });
    expect((await draining).banksRetained).toEqual([]);
    expect(seen).toEqual(['the push returned', 'the drain goes on, 6 WRITEs posted']);
  });

  it("a push still loading its destination at the drain's deadline is refused because the rank's transfer templates are closed, posting nothing", async () => {
    const { reader, prefill } = await servingPair(cleanups);
    const loads: (() => void)[] = [];
    const loadPeer = reader.agent.loadPeerInBackground.bind(reader.agent);
    own(vi.spyOn(reader.agent, 'loadPeerInBackground')).mockImplementation(
      (...args) => new Promise((resolve) => loads.push(() => resolve(loadPeer(...args)))),
    );
    const pushing = reader.endpoint.push({
      workerId: 'decode-0',
      sourceBlocks: Uint32Array.of(0),
      destinationBlocks: Uint32Array.of(5),
    });
    await vi.waitFor(() => expect(loads).toHaveLength(1), { timeout: 20_000, interval: 5 });
    const draining = reader.endpoint.drain({ deadlineMs: 1_000 });
    prefill.clock.advance(1_000);
    expect((await draining).banksRetained).toEqual([]);
    for (const load of loads) load();
    const refused = await pushing.catch((error: unknown) => error);
    expect(codeOf(refused)).toBe('DRAINING');
    expect((refused as Error).message).toBe(
      'cannot register a transfer template: this rank is draining: its transfer templates are closed; no new transfer is started',
    );
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });
});
