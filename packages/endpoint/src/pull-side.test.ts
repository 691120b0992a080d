// ReuseEndpoint.pull between real loopback agents in this process, over a memory discovery store: a
// serving decode worker of TP 2 and a prefill worker of TP 1, each rank its own ReuseEndpoint.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultSettings } from '../test/support/settings.js';
import type { RankPart } from '@kvreuse/descriptors';
import { ClusterSecret, MemoryDiscoveryStore, type ReadinessGate, startRankPublication } from '@kvreuse/discovery';
import { DrainController } from '@kvreuse/drain';
import { TransferCalibration } from '@kvreuse/router';
import { describe, expect, it, vi } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import {
  allReady,
  type HintSource,
  hintFor,
  openWorker,
  servingPair,
  start,
  testGeometry,
  transport,
} from '../test/support/endpoint-workers.js';
import { type AgentMetadata, signedTestParts, testWorker } from '../test/workers.js';
import { EndpointOptionError, PullRefusedError } from './errors.js';
import { PullShortfallError } from './pull-receipt.js';
import { EndpointMetrics } from './metrics.js';
import type { HeldPin } from './pins.js';
import { holdGrants } from '../test/support/held-grants.js';

const { cleanups, own } = cleanupsAfterEach();

async function pair() {
  const metrics = new EndpointMetrics();
  return { ...(await servingPair(cleanups, { metrics })), metrics };
}

/** Publishes `parts` as a ready worker in discovery (no endpoint behind it) and returns it as a hint names it. */
async function publish(store: MemoryDiscoveryStore, parts: RankPart[]): Promise<HintSource> {
  const publication = await startRankPublication(store, parts, { leaseTtlMs: 600_000 });
  cleanups.push(() => publication.withdraw());
  return { workerId: parts[0]!.workerId, incarnation: parts[0]!.incarnation, epoch: publication.epoch };
}

/** A GPU source as discovery shows it: rank parts whose banks are `vram` (a stand-in: loopback agents register no GPU memory). */
function publishVramSource(store: MemoryDiscoveryStore): Promise<HintSource> {
  const worker = testWorker(testGeometry, 1, 8, 'decode-gpu');
  return publish(
    store,
    worker.ranks.map((part): RankPart => ({
      ...part,
      banks: part.banks.map((bank) => ({ ...bank, memKind: 'vram' as const })),
    })),
  );
}

/** A source whose ranks are these agents (TP `agents.length`), their metadata signed with this process's secret: a pull from it gets as far as loading their peers. */
function publishAgentsSource(store: MemoryDiscoveryStore, agents: readonly AgentMetadata[]): Promise<HintSource> {
  return publish(store, signedTestParts(testGeometry, 'decode-agents', agents, ClusterSecret.ofThisProcess()));
}

const destinationBlocks = (count: number) => Uint32Array.from({ length: count }, (_, i) => i);

describe('ReuseEndpoint.pull', () => {
  it('pulls 6 blocks from both ranks of a TP 2 source, verifies each and releases the pins', async () => {
    const { decode, reader, pinsHeld, metrics } = await pair();
    const receipt = await reader.endpoint.pull({ hint: hintFor(decode, 6), destinationBlocks: destinationBlocks(6) });
    const blockBytes = 2 * 2 * 4 * 2 * 8 * 2;
    expect(receipt).toMatchObject({
      requested: 6,
      blocks: 6,
      bytes: 6 * blockBytes,
      bytesMoved: 6 * blockBytes,
      verify: 'full',
      checkedBlocks: 6,
      recomputed: { blocks: 0, reasons: [] },
    });
    await reader.endpoint.pinsReleased();
    expect(pinsHeld()).toEqual([0, 0]);
    // A second pull reuses the registered templates and pins again.
    const again = await reader.endpoint.pull({
      hint: hintFor(decode, 3),
      destinationBlocks: Uint32Array.of(5, 6, 7),
      verify: 'sampled',
      sampleEvery: 2,
    });
    expect(again).toMatchObject({ blocks: 3, checkedBlocks: 2 });
    expect(reader.endpoint.ledger.counts().posted).toBe(4);
    const text = await metrics.text();
    expect(text).toMatch(/kvreuse_transfer_blocks_total\{[^}]*side="pull"[^}]*\} 9/);
    expect(text).toContain('kvreuse_pins_held{side="pull"} 0');
  });

  it("reports the pin round trip by the endpoint's clock and resolves before the pins are given back", async () => {
    const { decode, reader, prefill, pinsHeld } = await pair();
    // Each source rank takes 5 ms of the reader's clock to grant its pin and 3 ms to take it back; nothing
    // else moves that clock.
    for (const { pool } of decode.ranks) {
      const requestPin = pool.requestPin.bind(pool);
      const releasePin = pool.releasePin.bind(pool);
      own(vi.spyOn(pool, 'requestPin')).mockImplementation((pinId, hashes) => {
        prefill.clock.advance(5);
        return requestPin(pinId, hashes);
      });
      own(vi.spyOn(pool, 'releasePin')).mockImplementation((pinId) => {
        prefill.clock.advance(3);
        releasePin(pinId);
      });
    }
    let letGo = (): void => undefined;
    const receipt = await reader.endpoint.pull({
      hint: hintFor(decode, 4),
      destinationBlocks: destinationBlocks(4),
      beforeRelease: () => new Promise<void>((resolve) => (letGo = resolve)),
    });
    expect(receipt).toMatchObject({ blocks: 4, checkedBlocks: 4, ms: 0 });
    expect(receipt.phases).toEqual({ pinMs: 10, verifyMs: 0, releaseMs: 0 });
    // The pull resolved with its pins still held: their release waits for beforeRelease, then the sources.
    expect(pinsHeld()).toEqual([1, 1]);
    const released = reader.endpoint.pinsReleased();
    letGo();
    await released;
    expect(pinsHeld()).toEqual([0, 0]);
    expect(prefill.clock.now()).toBe(16);
  });

  it('a drain waits for the release of a returned pull at most its deadline, not for a beforeRelease that does not settle', async () => {
    const { decode, reader, prefill, pinsHeld } = await pair();
    let letGo = (): void => undefined;
    const receipt = await reader.endpoint.pull({
      hint: hintFor(decode, 4),
      destinationBlocks: destinationBlocks(4),
      beforeRelease: () => new Promise<void>((resolve) => (letGo = resolve)),
    });
    expect(receipt).toMatchObject({ blocks: 4 });
    const handedOn = own(vi.spyOn(DrainController.prototype, 'drain'));
    const draining = reader.endpoint.drain({ deadlineMs: 1_000 });
    prefill.clock.advance(1_000);
    const report = await draining;
    expect([reader.endpoint.state, report.banksRetained]).toEqual(['drained', []]);
    // The wait spent the whole deadline: the rest of the drain gets what is left of it, nothing.
    expect(handedOn).toHaveBeenCalledWith({ deadlineMs: 0 });
    // The hook has not let them go: the sources still hold the pins.
    expect(pinsHeld()).toEqual([1, 1]);
    letGo();
    await reader.endpoint.pinsReleased();
    expect(pinsHeld()).toEqual([0, 0]);
  });

  it('a drain whose pulls released their pins at once hands its whole deadline on to the rest of the drain', async () => {
    const { decode, reader } = await pair();
    await reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
    await reader.endpoint.pinsReleased();
    const handedOn = own(vi.spyOn(DrainController.prototype, 'drain'));
    await reader.endpoint.drain({ deadlineMs: 1_000 });
    expect(handedOn).toHaveBeenCalledWith({ deadlineMs: 1_000 });
  });

  it('a drain waits for a pull in flight: the pull reads and verifies its blocks and gives its pins back before the drain goes on', async () => {
    const { decode, reader, pinsHeld } = await pair();
    const grants = holdGrants(own, decode);
    const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
    await vi.waitFor(() => expect(grants).toHaveLength(2), { timeout: 20_000, interval: 5 });
    const seen: string[] = [];
    const goOn = DrainController.prototype.drain;
    own(vi.spyOn(DrainController.prototype, 'drain')).mockImplementation(function (
      this: DrainController<never>,
      options,
    ) {
      seen.push(`the drain goes on, pins held: ${pinsHeld().join(', ')}`);
      return goOn.call(this, options);
    });
    void pulling.then(() => seen.push('the pull returned'));
    const draining = reader.endpoint.drain({ deadlineMs: 60_000 });
    for (const grant of grants) grant();
    expect(await pulling).toMatchObject({ blocks: 4, checkedBlocks: 4, recomputed: { reasons: [] } });
    const report = await draining;
    expect(seen).toEqual(['the pull returned', 'the drain goes on, pins held: 0, 0']);
    expect(report.banksRetained).toEqual([]);
  });

  it("a pull still in flight at the drain's deadline: the drain goes on without it; the pull, granted afterwards, reads nothing, says why and gives its pins back", async () => {
    const { decode, reader, prefill, pinsHeld } = await pair();
    const grants = holdGrants(own, decode);
    const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
    await vi.waitFor(() => expect(grants).toHaveLength(2), { timeout: 20_000, interval: 5 });
    const handedOn = own(vi.spyOn(DrainController.prototype, 'drain'));
    const draining = reader.endpoint.drain({ deadlineMs: 1_000 });
    prefill.clock.advance(1_000);
    const report = await draining;
    expect(handedOn).toHaveBeenCalledWith({ deadlineMs: 0 });
    expect(report.banksRetained).toEqual([]);
    for (const grant of grants) grant();
    expect(await pulling).toMatchObject({
      blocks: 0,
      recomputed: {
        fromBlock: 0,
        blocks: 4,
        reasons: [{ kind: 'operation-failed', code: 'DRAINING', detail: expect.stringContaining('drained') }],
      },
    });
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
    await reader.endpoint.pinsReleased();
    expect(pinsHeld()).toEqual([0, 0]);
  });

  it('a pull still pinning when its rank closes past the deadline ends at once: nothing posted, every pin request READER_CLOSED, no timer left', async () => {
    const { decode, reader, prefill } = await pair();
    const grants = holdGrants(own, decode);
    const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
    await vi.waitFor(() => expect(grants).toHaveLength(2), { timeout: 20_000, interval: 5 });
    const closing = reader.endpoint.close({ deadlineMs: 1_000 });
    prefill.clock.advance(1_000);
    expect(await closing).toMatchObject({ agentDestroyed: true });
    const receipt = await pulling;
    expect(receipt).toMatchObject({ blocks: 0, recomputed: { fromBlock: 0, blocks: 4 } });
    expect(receipt.recomputed.reasons).toEqual([
      expect.objectContaining({ kind: 'pin-refused', reason: 'READER_CLOSED', sourceRank: { tpRank: 0, ppRank: 0 } }),
      expect.objectContaining({ kind: 'pin-refused', reason: 'READER_CLOSED', sourceRank: { tpRank: 1, ppRank: 0 } }),
      expect.objectContaining({ kind: 'operation-failed', code: 'DRAINING' }),
    ]);
    expect(prefill.clock.pending).toBe(0);
    // The sources grant afterwards, to an agent that is gone: the grants cannot be sent, so no pin is held.
    for (const grant of grants) grant();
    await vi.waitFor(
      () => expect(decode.ranks.map(({ endpoint }) => endpoint.pinServer?.unansweredMessages)).toEqual([1, 1]),
      { timeout: 20_000, interval: 5 },
    );
    expect(decode.ranks.map(({ endpoint }) => endpoint.pinServer?.heldPins)).toEqual([0, 0]);
  });

  it("beforeRelease keeps the pins past the reads: a closing source's drain waits for them, and its report says they were released", async () => {
    const { decode, reader, pinsHeld } = await pair();
    const held: (readonly HeldPin[])[] = [];
    let letGo = (): void => undefined;
    const pulling = reader.endpoint.pull({
      hint: hintFor(decode, 4),
      destinationBlocks: destinationBlocks(4),
      beforeRelease: (pins) => {
        held.push(pins);
        return new Promise<void>((resolve) => (letGo = resolve));
      },
    });
    await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 20_000, interval: 5 });
    expect(held[0]?.map((pin) => pin.source.rank.tpRank).sort()).toEqual([0, 1]);
    expect(pinsHeld()).toEqual([1, 1]);
    const source = decode.ranks[0]!.endpoint;
    // close() without drain(): it drains first, and its report lists the pins waited for as drain()'s does.
    const closing = source.close({ deadlineMs: 60_000 });
    // The source refuses new pins once its drain waits for the held ones (its clock, a manual one, never reaches the deadline).
    await vi.waitFor(() => expect(source.pinServer?.refusing).toBe(true), { timeout: 20_000, interval: 5 });
    expect(source.state).toBe('draining');
    letGo();
    expect(await pulling).toMatchObject({ blocks: 4, checkedBlocks: 4, recomputed: { reasons: [] } });
    const { report } = await closing;
    expect(report.pins).toEqual([
      { pinId: expect.any(String), readerAgent: reader.agent.name, blocks: 4, ended: 'released' },
    ]);
    expect(report.readers).toEqual({ released: 1, lapsed: 0, outstanding: 0 });
  });

  it("records each receipt that prices its blocks in the router's calibration: the next estimate is the pull's measured time", async () => {
    const calibration = new TransferCalibration({ minReceipts: 1 });
    const { decode, reader } = await servingPair(cleanups, { calibration });
    expect(calibration.transferFit('same-host', 'host')).toBeUndefined();
    const receipt = await reader.endpoint.pull({ hint: hintFor(decode, 6), destinationBlocks: destinationBlocks(6) });
    expect(receipt.calibration).toMatchObject({
      linkClass: 'same-host',
      tier: 'host',
      blocks: 6,
      transferMs: receipt.ms,
    });
    const fit = calibration.transferEstimate('same-host', 'host');
    expect(fit).toMatchObject({ receipts: 1, fixedMs: 0 });
    expect(fit?.blockUs).toBeCloseTo((receipt.ms * 1000) / 6, 6);
    // Hashes the source does not hold: the pins are refused, nothing moves, nothing is recorded.
    const refused = await reader.endpoint.pull({
      hint: hintFor(decode, 2, { hashes: BigUint64Array.of(1n, 2n) }),
      destinationBlocks: destinationBlocks(2),
    });
    expect(refused.blocks).toBe(0);
    expect(calibration.transferFit('same-host', 'host')?.receipts).toBe(1);
  });

  it('verifies as the endpoint.verify setting says when the pull names no mode; a mode the pull names wins; the receipt says which ran', async () => {
    const sampled = { ...defaultSettings, endpoint: { ...defaultSettings.endpoint, verify: 'sampled' as const } };
    const { decode, reader } = await servingPair(cleanups, { settings: sampled });
    // Sampled, every 8th block and the last: blocks 0 and 5 of 6.
    expect(
      await reader.endpoint.pull({ hint: hintFor(decode, 6), destinationBlocks: destinationBlocks(6) }),
    ).toMatchObject({ blocks: 6, verify: 'sampled', checkedBlocks: 2 });
    expect(
      await reader.endpoint.pull({ hint: hintFor(decode, 6), destinationBlocks: destinationBlocks(6), verify: 'full' }),
    ).toMatchObject({ blocks: 6, verify: 'full', checkedBlocks: 6 });
    const off = { ...defaultSettings, endpoint: { ...defaultSettings.endpoint, verify: 'off' as const } };
    const unchecked = await servingPair(cleanups, { settings: off });
    expect(
      await unchecked.reader.endpoint.pull({
        hint: hintFor(unchecked.decode, 6),
        destinationBlocks: destinationBlocks(6),
      }),
    ).toMatchObject({ blocks: 6, verify: 'off', checkedBlocks: 0 });
  });

  it('refuses a source whose metadata another cluster secret signed before loading it: nothing loaded, pinned or posted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvreuse-pull-secret-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const { decode, reader, pinsHeld } = await servingPair(cleanups, {
      secret: ClusterSecret.readOrCreate(join(dir, 'another.secret')),
    });
    const load = own(vi.spyOn(reader.agent, 'loadPeerInBackground'));
    const refused = await reader.endpoint
      .pull({ hint: hintFor(decode, 2), destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PullRefusedError);
    expect(refused).toMatchObject({
      code: 'PULL_REFUSED',
      reason: 'metadata-refused',
      message: expect.stringMatching(
        /^pull refused \(metadata-refused\): decode-0 tp 0 pp 0: transport metadata of agent .* refused \(wrong-signature\)/,
      ),
      cause: expect.objectContaining({
        code: 'TRANSPORT_METADATA_REFUSED',
        refusal: 'wrong-signature',
        agentName: decode.ranks[0]!.agent.name,
      }),
    });
    expect(load).not.toHaveBeenCalled();
    expect(reader.agent.counters().livePeers).toBe(0);
    expect(pinsHeld()).toEqual([0, 0]);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('refuses a source rank whose agent is gone while discovery still lists it (its lease has not lapsed yet): nothing loaded, pinned or posted', async () => {
    const { store, reader } = await pair();
    const gone = await transport.createAgent({ name: `pull-gone-${process.pid}`, backend: 'loopback' });
    const source = await publishAgentsSource(store, [gone]);
    await gone.close();
    const refused = await reader.endpoint
      .pull({ hint: hintFor(source, 2), destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PullRefusedError);
    expect(refused).toMatchObject({
      reason: 'source-unreachable',
      message: expect.stringMatching(
        /^pull refused \(source-unreachable\): decode-agents tp 0 pp 0: its agent cannot be reached \(kvt_peer_load failed with REMOTE_DISCONNECT: .* is not alive\)$/,
      ),
      cause: expect.objectContaining({
        name: 'NativeTransportError',
        code: 'REMOTE_DISCONNECT',
        call: 'kvt_peer_load',
      }),
    });
    expect(reader.agent.counters().livePeers).toBe(0);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('a TP 2 source whose second rank is refused leaves no peer the pull loaded: the first rank’s is unloaded, one loaded before the pull is kept', async () => {
    const { store, reader } = await pair();
    const live = await transport.createAgent({ name: `pull-live-${process.pid}`, backend: 'loopback' });
    cleanups.push(() => live.close());
    const gone = await transport.createAgent({ name: `pull-gone-tp1-${process.pid}`, backend: 'loopback' });
    const source = await publishAgentsSource(store, [live, gone]);
    await gone.close();
    const pullFromSource = () =>
      reader.endpoint
        .pull({ hint: hintFor(source, 2), destinationBlocks: destinationBlocks(2) })
        .catch((error: unknown) => error);
    expect(reader.agent.counters().livePeers).toBe(0);
    expect(await pullFromSource()).toMatchObject({
      reason: 'source-unreachable',
      message: expect.stringContaining('decode-agents tp 1 pp 0: its agent cannot be reached'),
    });
    expect(reader.endpoint.peers.names()).toEqual([]);
    expect(reader.agent.counters().livePeers).toBe(0);
    // Loaded before the pull (as the source side loads a reader that pins): the refused pull leaves it loaded.
    const loadedBefore = reader.agent.loadPeer(live.metadata());
    expect(await pullFromSource()).toMatchObject({ reason: 'source-unreachable' });
    expect(loadedBefore.info().state).toBe('ready');
    expect(reader.agent.counters().livePeers).toBe(1);
    expect(reader.endpoint.peers.names()).toEqual([]);
  });

  it('refuses before pinning or posting: not ready, a source not ready under the hinted epoch, a shortfall policy of fail on a refused pin', async () => {
    const { decode, prefill, reader, pinsHeld, metrics } = await pair();
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const unpublished = await openWorker(store, { workerId: 'prefill-1', role: 'prefill', tpSize: 1 }, cleanups);
    await unpublished.ranks[0]!.endpoint.register();
    const notReady = await unpublished.ranks[0]!.endpoint.pull({
      hint: hintFor(decode, 2),
      destinationBlocks: destinationBlocks(2),
    }).catch((error: unknown) => error);
    expect(notReady).toBeInstanceOf(PullRefusedError);
    expect(notReady).toMatchObject({ code: 'PULL_REFUSED', reason: 'not-ready' });

    const stale = await reader.endpoint
      .pull({ hint: hintFor(decode, 2, { epoch: 999 }), destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(stale).toMatchObject({ code: 'PULL_REFUSED', reason: 'source-not-ready' });
    expect((stale as Error).message).toMatch(/not the hinted .* at epoch 999/);
    const absent = await reader.endpoint
      .pull({ hint: hintFor(decode, 2, { workerId: 'decode-9' }), destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(absent).toMatchObject({ code: 'PULL_REFUSED', reason: 'source-not-ready' });
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
    expect(pinsHeld()).toEqual([0, 0]);

    // Hashes the source does not hold: each rank refuses the pin (evicted); nothing is posted.
    const unknown = hintFor(decode, 2, { hashes: BigUint64Array.of(1n, 2n) });
    const recomputed = await reader.endpoint.pull({ hint: unknown, destinationBlocks: destinationBlocks(2) });
    expect(recomputed).toMatchObject({
      blocks: 0,
      recomputed: {
        fromBlock: 0,
        blocks: 2,
        reasons: [
          { kind: 'pin-refused', reason: 'evicted', sourceRank: { tpRank: 0 } },
          { kind: 'pin-refused', reason: 'evicted', sourceRank: { tpRank: 1 } },
        ],
      },
    });
    const failed = await reader.endpoint
      .pull({ hint: unknown, destinationBlocks: destinationBlocks(2), policy: 'fail' })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(PullShortfallError);
    expect(failed).toMatchObject({ message: 'pull verified 0 of 2 blocks: pin-refused at block 0' });
    expect(await metrics.text()).toContain('kvreuse_transfer_failures_total{side="pull",code="pin-refused"} 4');
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
    expect(prefill.ranks[0]!.endpoint.state).toBe('ready');
  });

  it('refuses an incompatible source and a vram source without an admission gate, nothing posted', async () => {
    const { reader, store } = await pair();
    const other = await openWorker(
      store,
      {
        workerId: 'decode-wide',
        role: 'decode',
        tpSize: 1,
        serve: true,
        geometry: {
          numLayers: 2,
          kvPlanes: 2,
          blockTokens: 4,
          numKvHeads: 2,
          headDim: 16,
          dtype: 'bf16',
          bankLayout: 'layer-separate',
          headOrder: 'NHD',
        },
      },
      cleanups,
    );
    await start(other);
    await allReady(other);
    const incompatible = await reader.endpoint
      .pull({ hint: hintFor(other, 2), destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(incompatible).toMatchObject({ code: 'PULL_REFUSED', reason: 'incompatible' });
    expect((incompatible as Error).message).toMatch(/headDim/);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
    expect(other.ranks[0]!.endpoint.pinServer?.heldPins).toBe(0);

    const gpu = await publishVramSource(store);
    const hint = { ...hintFor(other, 2), ...gpu, tier: 'gpu' as const };
    const noGate = await reader.endpoint
      .pull({ hint, destinationBlocks: destinationBlocks(2) })
      .catch((error: unknown) => error);
    expect(noGate).toMatchObject({ code: 'PULL_REFUSED', reason: 'admission' });
    expect((noGate as Error).message).toMatch(/4 vram banks .* none is installed/);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('refuses a vram source its admission gate refuses, naming the gate and its reason', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const admissionGate: ReadinessGate = {
      name: 'profile-admission',
      evaluate: (worker) =>
        worker.workerId === 'decode-gpu'
          ? { pass: false, reason: 'profile host-only admits no GPU memory' }
          : { pass: true },
    };
    const prefill = await openWorker(
      store,
      { workerId: 'prefill-0', role: 'prefill', tpSize: 1, admissionGate },
      cleanups,
    );
    await start(prefill);
    await allReady(prefill);
    const gpu = await publishVramSource(store);
    const hint = { ...hintFor(prefill, 2), ...gpu, tier: 'gpu' as const };
    const refused = await prefill.ranks[0]!.endpoint.pull({ hint, destinationBlocks: destinationBlocks(2) }).catch(
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: 'PULL_REFUSED', reason: 'admission' });
    expect((refused as Error).message).toMatch(/profile host-only admits no GPU memory/);
    expect(prefill.ranks[0]!.endpoint.ledger.counts().posted).toBe(0);
  });

  it('refuses a malformed request and an aborted one before pinning', async () => {
    const { decode, reader, pinsHeld } = await pair();
    await expect(
      reader.endpoint.pull({ hint: hintFor(decode, 3), destinationBlocks: destinationBlocks(2) }),
    ).rejects.toMatchObject({ code: 'INVALID_ENDPOINT_OPTION', option: 'request.destinationBlocks' });
    await expect(
      reader.endpoint.pull({
        hint: hintFor(decode, 2),
        destinationBlocks: destinationBlocks(2),
        verify: 'most' as never,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ENDPOINT_OPTION', option: 'request.verify' });
    await expect(
      reader.endpoint.pull({
        hint: hintFor(decode, 2),
        destinationBlocks: destinationBlocks(2),
        policy: 'retry' as never,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ENDPOINT_OPTION', option: 'request.policy' });
    await expect(
      reader.endpoint.pull({
        hint: hintFor(decode, 2),
        destinationBlocks: destinationBlocks(2),
        verify: 'sampled',
        sampleEvery: 0,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ENDPOINT_OPTION', option: 'request.sampleEvery' });
    const notAFunction = reader.endpoint.pull({
      hint: hintFor(decode, 2),
      destinationBlocks: destinationBlocks(2),
      beforeRelease: 'later' as never,
    });
    await expect(notAFunction).rejects.toBeInstanceOf(EndpointOptionError);
    await expect(notAFunction).rejects.toThrow(
      'endpoint option request.beforeRelease = "later" is refused: a function (pins) => Promise',
    );
    const controller = new AbortController();
    controller.abort(new Error('the request was cancelled'));
    await expect(
      reader.endpoint.pull({
        hint: hintFor(decode, 2),
        destinationBlocks: destinationBlocks(2),
        signal: controller.signal,
      }),
    ).rejects.toThrow('the request was cancelled');
    expect(pinsHeld()).toEqual([0, 0]);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('refuses a hint without its blocks or hashes, a hash outside 64 bits, a start that is no block position, no blocks and a signal that is no AbortSignal, before anything is pinned', async () => {
    const { decode, reader, pinsHeld } = await pair();
    const hint = hintFor(decode, 2);
    const refused = (request: object) =>
      reader.endpoint.pull({ destinationBlocks: destinationBlocks(2), ...request } as never);
    await expect(refused({ hint: { ...hint, blocks: undefined } })).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.hint',
    });
    await expect(refused({ hint: { ...hint, hashes: undefined } })).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.hint.hashes',
    });
    await expect(refused({ hint: { ...hint, hashes: [-1n, 0x1001n] } })).rejects.toThrow(
      "endpoint option request.hint.hashes = [-1n,4097n] is refused: the hinted blocks' hashes: a BigUint64Array or an array of bigints of 0 to 2^64 - 1",
    );
    await expect(refused({ hint: { ...hint, hashes: ['0x1000', '0x1001'] } })).rejects.toMatchObject({
      option: 'request.hint.hashes',
    });
    await expect(refused({ hint: { ...hint, blocks: { start: Number.NaN, count: 2 } } })).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.hint.blocks.start',
    });
    await expect(refused({ hint: hintFor(decode, 0), destinationBlocks: new Uint32Array() })).rejects.toThrow(
      new EndpointOptionError('request.hint.blocks.count', 0, 'a whole number of blocks, at least 1'),
    );
    await expect(refused({ hint, signal: { aborted: false } })).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.signal',
    });
    expect(pinsHeld()).toEqual([0, 0]);
    expect(reader.endpoint.ledger.counts().posted).toBe(0);
  });

  it('refuses destination blocks outside its banks or named twice before pinning anything', async () => {
    const { decode, reader } = await pair();
    const requestPin = own(vi.spyOn(decode.ranks[0]!.pool, 'requestPin'));
    await expect(
      reader.endpoint.pull({ hint: hintFor(decode, 2), destinationBlocks: Uint32Array.of(0, 8) }),
    ).rejects.toMatchObject({
      code: 'INVALID_ENDPOINT_OPTION',
      option: 'request.destinationBlocks',
      rule: expect.stringMatching(/^destination block 8 \(block list index 1\) is outside bank 0 of rank/),
    });
    await expect(
      reader.endpoint.pull({ hint: hintFor(decode, 2), destinationBlocks: Uint32Array.of(3, 3) }),
    ).rejects.toMatchObject({
      option: 'request.destinationBlocks',
      rule: expect.stringContaining('destination block 3 is written twice'),
    });
    expect(requestPin).not.toHaveBeenCalled();
  });

  it('pulls into the blocks it was given: the caller changing its destination blocks and hashes once pull() returned changes nothing', async () => {
    const { decode, reader } = await pair();
    const hint = hintFor(decode, 2);
    const blocks = destinationBlocks(2);
    const pulled = reader.endpoint.pull({ hint, destinationBlocks: blocks });
    blocks[1] = 0xffff_fff0;
    (hint.hashes as BigUint64Array)[0] = 0xdeadn;
    expect(await pulled).toMatchObject({ requested: 2, blocks: 2, recomputed: { blocks: 0, reasons: [] } });
  });

  /** The reads of both rank pairs, given up on when a pin was lost (`why` is in its detail). */
  const readsGivenUp = (why: string) =>
    [0, 1].map((pair) =>
      expect.objectContaining({
        kind: 'operation-failed',
        fromBlock: 0,
        pair,
        code: 'OPERATION_TIMED_OUT',
        detail: expect.stringContaining(why),
      }),
    );

  it('a source that revokes its pins while the reads run: the receipt recomputes everything and says why', async () => {
    const { decode, reader, pinsHeld } = await pair();
    reader.agent.faults.delayCompletions('forever');
    const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBe(2), { timeout: 20_000, interval: 5 });
    expect(pinsHeld()).toEqual([1, 1]);
    // The source's shutdown past its deadline takes the pins back (an already-passed deadline).
    const revoked = await decode.ranks[1]!.endpoint.pinServer!.waitForReaders({
      deadlineAt: 0,
      timeoutMs: 0,
      signal: AbortSignal.abort(),
    });
    expect(revoked).toMatchObject({ outstanding: 1, pins: [{ ended: 'revoked' }] });
    // The reads are still held when the revoke arrives: the reader gives both up at once.
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().cancelled).toBe(2), { timeout: 20_000, interval: 5 });
    reader.agent.faults.clear();
    const receipt = await pulling;
    expect(receipt).toMatchObject({ blocks: 0, recomputed: { fromBlock: 0, blocks: 4 } });
    expect(receipt.recomputed.reasons).toEqual([
      ...readsGivenUp('revoked by the source (shutting-down)'),
      expect.objectContaining({ kind: 'pin-lost', reason: 'shutting-down', sourceRank: { tpRank: 1, ppRank: 0 } }),
    ]);
    await reader.endpoint.pinsReleased();
    expect(pinsHeld()).toEqual([0, 0]);
  });

  it(
    'a source rank that stops answering while the reads run: the heartbeat ends its pin and the receipt recomputes, saying why',
    { timeout: 60_000 },
    async () => {
      const { decode, reader, pinsHeld } = await pair();
      reader.agent.faults.delayCompletions('forever');
      const pulling = reader.endpoint.pull({ hint: hintFor(decode, 4), destinationBlocks: destinationBlocks(4) });
      await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBe(2), { timeout: 20_000, interval: 5 });
      expect(pinsHeld()).toEqual([1, 1]);
      // Judged only once the source rank has answered a probe (only the reader probes it); then its progress stops (as a hung process's would).
      const stalled = decode.ranks[0]!;
      await vi.waitFor(() => expect(stalled.agent.counters().heartbeatsAnswered).toBeGreaterThan(0), {
        timeout: 20_000,
        interval: 10,
      });
      const unresponsive = new Promise((resolve) =>
        reader.endpoint.notifications.addPeerEventHandler(
          (event) => event.type === 'peer-unresponsive' && resolve(event.peerName),
        ),
      );
      stalled.agent.faults.stallProgress(true);
      cleanups.push(async () => stalled.agent.faults.stallProgress(false));
      expect(await unresponsive).toBe(stalled.agent.name);
      reader.agent.faults.clear();
      const receipt = await pulling;
      expect(receipt).toMatchObject({ blocks: 0, recomputed: { fromBlock: 0, blocks: 4 } });
      expect(receipt.recomputed.reasons).toEqual([
        ...readsGivenUp(`its agent ${stalled.agent.name} answered no heartbeat for`),
        expect.objectContaining({
          kind: 'pin-lost',
          reason: 'source-unresponsive',
          sourceRank: { tpRank: 0, ppRank: 0 },
        }),
      ]);
      // The reader gave up on that pin without releasing it: the source holds it until its lease lapses.
      stalled.agent.faults.stallProgress(false);
      await reader.endpoint.pinsReleased();
      expect(pinsHeld()).toEqual([1, 0]);
      decode.clock.advance(defaultSettings.discovery.leaseTtlMs);
      await vi.waitFor(() => expect(pinsHeld()).toEqual([0, 0]), { timeout: 20_000, interval: 5 });
    },
  );

  /** A ready decode worker of TP 1 that serves no pins: its rank takes pin requests and never answers them. */
  async function silentSource(store: MemoryDiscoveryStore) {
    const silent = await openWorker(store, { workerId: 'decode-silent', role: 'decode', tpSize: 1 }, cleanups);
    await start(silent);
    await allReady(silent);
    return silent;
  }

  it(
    'a source rank that stalls before it answers the pin: the heartbeat ends the request, the receipt recomputes and a later pull fails at once',
    { timeout: 60_000 },
    async () => {
      const { store, reader, prefill } = await pair();
      const silent = await silentSource(store);
      const source = silent.ranks[0]!;
      const pulling = reader.endpoint.pull({ hint: hintFor(silent, 4), destinationBlocks: destinationBlocks(4) });
      // The pending pin request has the source probed; it is judged only once it has answered a probe. Then its progress stops.
      await vi.waitFor(() => expect(source.agent.counters().heartbeatsAnswered).toBeGreaterThan(0), {
        timeout: 20_000,
        interval: 10,
      });
      source.agent.faults.stallProgress(true);
      cleanups.push(async () => source.agent.faults.stallProgress(false));
      const receipt = await pulling;
      expect(receipt).toMatchObject({
        blocks: 0,
        recomputed: {
          fromBlock: 0,
          blocks: 4,
          reasons: [{ kind: 'pin-refused', reason: 'source-unresponsive', sourceRank: { tpRank: 0 } }],
        },
      });
      expect(receipt.recomputed.reasons[0]).toMatchObject({
        detail: expect.stringContaining(`its agent ${source.agent.name} answered no heartbeat`),
      });
      expect(reader.endpoint.ledger.counts().posted).toBe(0);
      // Not by the reader's answer timeout: its manual clock never moved.
      expect(prefill.clock.now()).toBe(0);
      // Still unresponsive: the next pull's pin fails at once, nothing sent to the source.
      const failed = await reader.endpoint
        .pull({ hint: hintFor(silent, 4), destinationBlocks: destinationBlocks(4), policy: 'fail' })
        .catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(PullShortfallError);
      expect(failed).toMatchObject({
        message: 'pull verified 0 of 4 blocks: pin-refused at block 0',
        receipt: { recomputed: { reasons: [{ kind: 'pin-refused', reason: 'source-unresponsive' }] } },
      });
    },
  );

  it(
    'a source rank that closes before it answers the pin: the heartbeat ends the request and the fail policy throws the shortfall',
    { timeout: 60_000 },
    async () => {
      const { store, reader, prefill } = await pair();
      const silent = await silentSource(store);
      const source = silent.ranks[0]!;
      const pulling = reader.endpoint
        .pull({ hint: hintFor(silent, 4), destinationBlocks: destinationBlocks(4), policy: 'fail' })
        .catch((error: unknown) => error);
      await vi.waitFor(() => expect(source.agent.counters().heartbeatsAnswered).toBeGreaterThan(0), {
        timeout: 20_000,
        interval: 10,
      });
      await source.endpoint.close();
      const failed = await pulling;
      expect(failed).toBeInstanceOf(PullShortfallError);
      expect(failed).toMatchObject({
        receipt: {
          blocks: 0,
          recomputed: {
            reasons: [
              {
                kind: 'pin-refused',
                reason: 'source-unresponsive',
                sourceRank: { tpRank: 0 },
                detail: expect.stringContaining(source.agent.name),
              },
            ],
          },
        },
      });
      expect(reader.endpoint.ledger.counts().posted).toBe(0);
      expect(prefill.clock.now()).toBe(0);
    },
  );
});
