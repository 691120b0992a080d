// ReuseEndpoint.pull aborted by its signal while it loads the source peers or waits for the pins: it ends
// at once with the abort, and gives back what arrives afterwards.
import { describe, expect, it, vi } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { hintFor, servingPair } from '../test/support/endpoint-workers.js';
import { holdGrants } from '../test/support/held-grants.js';
import type { PinAdapter } from './pin-adapter.js';
import { RemotePeers } from './remote-peers.js';

const { cleanups, own } = cleanupsAfterEach();

const pair = () => servingPair(cleanups);
const destinationBlocks = (count: number) => Uint32Array.from({ length: count }, (_, i) => i);

describe('ReuseEndpoint.pull aborted', () => {
  /** A pull of 4 blocks from `decode` that the test aborts with `controller`. */
  function abortablePull(
    decode: Awaited<ReturnType<typeof pair>>['decode'],
    reader: Awaited<ReturnType<typeof pair>>['reader'],
  ) {
    const controller = new AbortController();
    const pulling = reader.endpoint.pull({
      hint: hintFor(decode, 4),
      destinationBlocks: destinationBlocks(4),
      signal: controller.signal,
    });
    return { pulling, controller };
  }

  it('a pull aborted while it waits for its pins ends at once with the abort; the pins granted afterwards are given back', async () => {
    const { decode, reader, pinsHeld } = await pair();
    const grants = holdGrants(own, decode);
    const { pulling, controller } = abortablePull(decode, reader);
    await vi.waitFor(() => expect(grants).toHaveLength(2), { timeout: 20_000, interval: 5 });
    controller.abort(new Error('the request was cancelled'));
    // Ends before any source answered its pin.
    await expect(pulling).rejects.toThrow('the request was cancelled');
    for (const grant of grants) grant();
    await reader.endpoint.pinsReleased();
    expect(decode.ranks.map(({ endpoint }) => endpoint.pinServer?.heldPins)).toEqual([0, 0]);
    expect(pinsHeld()).toEqual([0, 0]);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('a pull aborted while it loads its source peers ends at once with the abort, asks no pin, and gives the peers back once loaded', async () => {
    const { decode, reader } = await pair();
    const loads: (() => void)[] = [];
    const load = reader.agent.loadPeerInBackground.bind(reader.agent);
    own(vi.spyOn(reader.agent, 'loadPeerInBackground')).mockImplementation(
      (...args) => new Promise((resolve, reject) => loads.push(() => void load(...args).then(resolve, reject))),
    );
    const given = own(vi.spyOn(RemotePeers.prototype, 'release'));
    const asked = decode.ranks.map(({ pool }) => own(vi.spyOn(pool as PinAdapter, 'requestPin')));
    const { pulling, controller } = abortablePull(decode, reader);
    await vi.waitFor(() => expect(loads).toHaveLength(1), { timeout: 20_000, interval: 5 });
    controller.abort(new Error('the request was cancelled'));
    // Ends before its first peer is loaded.
    await expect(pulling).rejects.toThrow('the request was cancelled');
    loads[0]!();
    await vi.waitFor(() => expect(loads).toHaveLength(2), { timeout: 20_000, interval: 5 });
    loads[1]!();
    await reader.endpoint.pinsReleased();
    expect(given).toHaveBeenCalledTimes(1);
    expect([...(given.mock.calls[0]![0] as Iterable<unknown>)]).toHaveLength(2);
    for (const requestPin of asked) expect(requestPin).not.toHaveBeenCalled();
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });
});
