// pullPrefix over real loopback agents in this process: source agents with registered banks of
// deterministic bytes, a destination agent with registry banks, the drain ledger. The pins are a
// test-only fake (test/fake-pins.ts) to isolate the pull from the pin protocol.
import type { Geometry } from '@kvreuse/descriptors';
import { afterEach, describe, expect, it } from 'vitest';
import { fakePin, type FakePin } from '../test/fake-pins.js';
import { type LoopbackPull, openLoopbackPull, transport } from '../test/loopback-pull.js';
import { blockChecksums } from './block-checksum.js';
import { PullShortfallError } from './pull-receipt.js';
import { type PullOptions, pullPrefix } from './pull.js';

const geometry: Geometry = {
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 4,
  numKvHeads: 2,
  headDim: 8,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'NHD',
};
const BLOCKS = 8;
const PREFIX = 6;
// Per block over both pairs: 2 layers × 2 planes × 4 tokens × 2 heads × 8 × 2 bytes.
const BLOCK_BYTES = 2 * 2 * 4 * 2 * 8 * 2;

const opened: LoopbackPull[] = [];
afterEach(async () => {
  for (const pull of opened.splice(0)) await pull.close();
  expect(transport.counters()).toMatchObject({
    liveAgents: 0,
    liveRegistrations: 0,
    liveAllocations: 0,
    liveOperations: 0,
  });
});

/** A TP 2 → 1 pull of PREFIX blocks: source blocks 7, 6, …, destination blocks 0, 1, …; one pin per source rank, checksums taken now. */
async function tp2to1(pinCounts: readonly number[] = [PREFIX, PREFIX], onRelease?: (pin: string) => void) {
  const pull = await openLoopbackPull(geometry, 2, BLOCKS);
  opened.push(pull);
  const sourceBlocks = Uint32Array.from({ length: PREFIX }, (_, i) => BLOCKS - 1 - i);
  const destinationBlocks = Uint32Array.from({ length: PREFIX }, (_, i) => i);
  const pins = pull.template.pairs.map((route, pair): FakePin => {
    const sourceRank = pull.template.pairSourceRank[pair]!;
    const granted = sourceBlocks.subarray(0, pinCounts[sourceRank]);
    const pinId = `pin-${sourceRank}`;
    return fakePin({
      pinId,
      rank: route.sourceRank,
      sourceBlocks: granted,
      checksums: blockChecksums(pull.template, pair, 'source', pull.sourceBytes(sourceRank), granted),
      ...(onRelease === undefined ? {} : { onRelease: () => onRelease(pinId) }),
    });
  });
  const options: PullOptions = {
    ledger: pull.ledger,
    pairs: pull.pairs,
    pins,
    destinationBlocks,
    verify: 'full',
    policy: 'recompute',
    link: { linkClass: 'same-host', tier: 'host' },
  };
  return { pull, pins, options, sourceBlocks };
}

describe('pullPrefix on loopback agents', () => {
  it('pulls and verifies a full prefix from two source ranks into one (TP 2 → 1), then releases both pins', async () => {
    const { pins, options } = await tp2to1();
    // Each reading of the clock is 2 ms after the one before: the transfer takes exactly one step.
    let clockMs = 0;
    const receipt = await pullPrefix({
      ...options,
      prediction: { predictedMs: 5, blockTokens: 4, prefillTokenUs: 1000, lookupBudgetMs: 1 },
      now: () => (clockMs += 2),
    });
    expect(receipt.ms).toBe(2);
    expect(receipt).toMatchObject({
      requested: PREFIX,
      blocks: PREFIX,
      bytes: PREFIX * BLOCK_BYTES,
      bytesMoved: PREFIX * BLOCK_BYTES,
      verify: 'full',
      checkedBlocks: PREFIX,
      recomputed: { fromBlock: PREFIX, blocks: 0, reasons: [] },
      calibration: {
        linkClass: 'same-host',
        tier: 'host',
        blocks: PREFIX,
        bytes: PREFIX * BLOCK_BYTES,
        transferMs: receipt.ms,
      },
      saving: { predictedMs: 5, measuredMs: (PREFIX * 4 * 1000) / 1000 - receipt.ms - 1 },
    });
    expect(receipt.gbytesPerS).toBe((PREFIX * BLOCK_BYTES) / 2e6);
    expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);
  });

  it("reports the verification's time apart from the transfer's, and no pin time for pins that came held", async () => {
    const { options } = await tp2to1();
    // A clock that reads 100 ms once anything reads the destination's bytes (only the verification does).
    let clock = 0;
    const pairs = options.pairs.map((pair) => ({
      ...pair,
      bytes: new Proxy(pair.bytes, {
        get(target, property, receiver) {
          if (typeof property === 'string' && /^\d+$/.test(property)) clock = 100;
          return Reflect.get(target, property, receiver);
        },
      }),
    }));
    const receipt = await pullPrefix({ ...options, pairs, now: () => clock });
    expect(receipt).toMatchObject({ blocks: PREFIX, checkedBlocks: PREFIX, ms: 0 });
    expect(receipt.phases).toEqual({ verifyMs: 100, releaseMs: 0 });
  });

  it('hands the release to onReleasing and resolves once verified, before the pins are given back', async () => {
    const { pins, options } = await tp2to1();
    let letGo = (): void => undefined;
    let handed: Promise<void> | undefined;
    const receipt = await pullPrefix({
      ...options,
      beforeRelease: () => new Promise<void>((resolve) => (letGo = resolve)),
      onReleasing: (released) => (handed = released),
    });
    expect(receipt).toMatchObject({ blocks: PREFIX, checkedBlocks: PREFIX, phases: { releaseMs: 0 } });
    expect(pins.map((pin) => pin.releases)).toEqual([0, 0]);
    letGo();
    await handed;
    expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);
  });

  it('commits only the verified prefix before a block whose source bytes changed after its checksum was taken', async () => {
    const { pull, pins, options, sourceBlocks } = await tp2to1();
    // Block 3 of the prefix, as source rank 1 serves it: one byte of its first route's first row.
    const pair = pull.template.pairSourceRank.indexOf(1);
    const route = pull.template.pairRouteStart[pair]!;
    const bank = pull.sourceBytes(1)[pull.template.sourceBank[route]!]!;
    bank[
      Number(pull.template.sourceBase[route]! + BigInt(sourceBlocks[3]!) * pull.template.sourceBlockStride[route]!)
    ]! ^= 0xff;
    const receipt = await pullPrefix(options);
    expect(receipt.blocks).toBe(3);
    expect(receipt.checkedBlocks).toBe(3);
    expect(receipt.recomputed).toMatchObject({
      fromBlock: 3,
      blocks: PREFIX - 3,
      reasons: [{ kind: 'checksum-mismatch', fromBlock: 3, pair }],
    });
    expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);
    const error = await pullPrefix({ ...options, policy: 'fail' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PullShortfallError);
    expect(error).toMatchObject({
      code: 'PULL_SHORTFALL',
      receipt: { blocks: 3 },
      message: 'pull verified 3 of 6 blocks: checksum-mismatch at block 3',
    });
  });

  it('stops the prefix where a pin granted fewer blocks', async () => {
    const { options } = await tp2to1([PREFIX, 4]);
    const receipt = await pullPrefix(options);
    expect(receipt).toMatchObject({
      blocks: 4,
      bytesMoved: 4 * BLOCK_BYTES,
      recomputed: {
        fromBlock: 4,
        blocks: 2,
        reasons: [{ kind: 'pin-granted-fewer', fromBlock: 4, granted: 4, sourceRank: { tpRank: 1, ppRank: 0 } }],
      },
    });
  });

  it('recomputes everything with the native code when an operation fails, at its post or at its completion', async () => {
    const { pull, pins, options } = await tp2to1();
    pull.destination.faults.failNth('completion', 2, 'REMOTE_DISCONNECT');
    // Both posts reach the progress thread in one batch (as on a loaded machine): it serves them in the
    // order posted, so pair 1's operation is the second to complete.
    pull.destination.faults.stallProgress(true);
    const failing = pullPrefix(options);
    pull.destination.faults.stallProgress(false);
    const failed = await failing;
    expect(failed).toMatchObject({
      blocks: 0,
      recomputed: {
        fromBlock: 0,
        blocks: PREFIX,
        reasons: [{ kind: 'operation-failed', fromBlock: 0, pair: 1, code: 'REMOTE_DISCONNECT' }],
      },
    });
    expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);

    pull.destination.faults.failNth('post', 1, 'BUSY');
    const refused = await pullPrefix(options);
    expect(refused).toMatchObject({
      blocks: 0,
      bytesMoved: 0,
      recomputed: { reasons: [{ kind: 'operation-failed', pair: 0, code: 'BUSY' }] },
    });
    expect(pins.map((pin) => pin.releases)).toEqual([2, 2]);
  });

  it('recomputes everything when a pin is lost while its blocks are read, giving up on the reads at once', async () => {
    const { pull, pins, options } = await tp2to1();
    // The reads never complete by themselves: the pull ends only because the lost pin cancels them.
    pull.destination.faults.delayCompletions('forever');
    const pulling = pullPrefix(options);
    await expect.poll(() => pull.ledger.counts().posted).toBe(2);
    pins[0]!.lose({ reason: 'evicted', detail: 'source rank 0 evicted the blocks of pin-0' });
    const receipt = await pulling;
    const cancelled = (pair: number) =>
      expect.objectContaining({
        kind: 'operation-failed',
        fromBlock: 0,
        pair,
        code: 'OPERATION_TIMED_OUT',
        detail: expect.stringContaining('(pin lost: source rank 0 evicted the blocks of pin-0); cancelled'),
      });
    expect(receipt).toMatchObject({ blocks: 0, checkedBlocks: 0 });
    expect(receipt.recomputed.reasons).toEqual([
      cancelled(0),
      cancelled(1),
      expect.objectContaining({
        kind: 'pin-lost',
        fromBlock: 0,
        reason: 'evicted',
        sourceRank: { tpRank: 0, ppRank: 0 },
      }),
    ]);
    expect(pull.ledger.counts()).toMatchObject({ live: 0, cancelled: 2, timedOut: 0 });
    expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);
    pull.destination.faults.clear();
  });

  it('releases the pins only once every operation reading them is quiescent, after a timeout too', async () => {
    const liveAtRelease: number[] = [];
    let ledger: PullOptions['ledger'] | undefined;
    const { pull, pins, options } = await tp2to1([PREFIX, PREFIX], () =>
      liveAtRelease.push(ledger!.liveOperations().length),
    );
    ledger = pull.ledger;
    pull.destination.faults.delayCompletions('forever');
    const pulling = pullPrefix(options);
    await expect.poll(() => pull.ledger.counts().posted).toBe(2);
    // Both operations are held in flight: a cancel (as the operation timeout or a drain does) fails
    // the request; the pins stay held until the native layer confirms each operation terminal.
    for (const operation of pull.ledger.liveOperations()) expect(operation.phase).toBe('in-flight');
    expect(pins.map((pin) => pin.releases)).toEqual([0, 0]);
    const settling = pull.ledger.settle(0, Number.MAX_SAFE_INTEGER, 'test: cancelled as at the operation timeout');
    const receipt = await pulling;
    await settling;
    expect(liveAtRelease).toEqual([0, 0]);
    expect(receipt).toMatchObject({
      blocks: 0,
      recomputed: {
        reasons: [
          { kind: 'operation-failed', code: 'OPERATION_TIMED_OUT' },
          { kind: 'operation-failed', code: 'OPERATION_TIMED_OUT' },
        ],
      },
    });
    pull.destination.faults.clear();
  });

  it('under sampled verification checks every n-th block and the last; off checks none', async () => {
    const { pull, options, sourceBlocks } = await tp2to1();
    // Change block 1 at the source after its checksum was taken: sampling blocks 0, 2, 4 and 5 misses it.
    const route = pull.template.pairRouteStart[0]!;
    const sourceRank = pull.template.pairSourceRank[0]!;
    const bank = pull.sourceBytes(sourceRank)[pull.template.sourceBank[route]!]!;
    bank[
      Number(pull.template.sourceBase[route]! + BigInt(sourceBlocks[1]!) * pull.template.sourceBlockStride[route]!)
    ]! ^= 0xff;
    expect(await pullPrefix({ ...options, verify: 'sampled', sampleEvery: 2 })).toMatchObject({
      blocks: PREFIX,
      checkedBlocks: 4,
      verify: 'sampled',
    });
    expect(await pullPrefix({ ...options, verify: 'sampled', sampleEvery: 1 })).toMatchObject({
      blocks: 1,
      checkedBlocks: 1,
      recomputed: { reasons: [{ kind: 'checksum-mismatch', fromBlock: 1 }] },
    });
    expect(await pullPrefix({ ...options, verify: 'off' })).toMatchObject({
      blocks: PREFIX,
      checkedBlocks: 0,
      verify: 'off',
    });
  });

  it('refuses bad options before posting anything, naming the option', async () => {
    const { pull, pins, options } = await tp2to1();
    const refused = (changed: Partial<PullOptions>, option: RegExp) =>
      expect(pullPrefix({ ...options, ...changed })).rejects.toThrow(option);
    await refused({ verify: 'most' as never }, /verify = .*must be 'full', 'sampled' or 'off'/);
    await refused({ policy: 'retry' as never }, /policy = /);
    await refused({ pins: [pins[0]!] }, /pairs\[1\] = 1 is refused: has no pin from its source rank/);
    await refused(
      { pins: pins.map(({ checksums: _, ...pin }) => pin as never) },
      /carry no checksums, yet verify is 'full'/,
    );
    await refused({ sampleEvery: 0, verify: 'sampled' }, /sampleEvery = 0/);
    await refused({ destinationBlocks: [0] as never }, /destinationBlocks = /);
    expect(pull.ledger.counts().posted).toBe(0);
    expect(pins.map((pin) => pin.releases)).toEqual([0, 0]);
  });
});
