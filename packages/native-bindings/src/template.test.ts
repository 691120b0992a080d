import {
  BlockOutOfRangeError,
  buildTransferTemplate,
  type Dtype,
  DuplicateDestinationBlockError,
  type Geometry,
  materialize,
  type TransferTemplate,
} from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import { testedBackends } from '../test/support/backends.js';
import { fillPattern } from '../test/support/content.js';
import { allZero, liveCounters } from '../test/support/pair.js';
import { closeRank, openRank, type RankSide, workerOf } from '../test/support/ranks.js';
import { ForeignHandleError, HandleClosedError, InvalidArgumentError, NativeTransportError } from './errors.js';
import type { Backend } from './backend.js';
import type { Operation } from './operation.js';
import type { TransferDirection } from './transfer.js';

const SOURCE_BLOCKS = 5;
const DESTINATION_BLOCKS = 6;

/** mulberry32: the cases are random but the same on every run. */
function randomSource(seed: number): (bound: number) => number {
  let state = seed >>> 0;
  return (bound) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) % bound) as number;
  };
}

function pick<T>(random: (bound: number) => number, values: readonly T[]): T {
  return values[random(values.length)] as T;
}

function randomGeometry(random: (bound: number) => number): Geometry {
  return {
    numLayers: 1 + random(3),
    kvPlanes: pick(random, [1, 2] as const),
    blockTokens: pick(random, [2, 4, 8]),
    numKvHeads: pick(random, [2, 4]),
    headDim: pick(random, [4, 8, 16]),
    dtype: pick<Dtype>(random, ['bf16', 'fp32', 'int8']),
    bankLayout: pick(random, ['layer-separate', 'fully-contiguous'] as const),
    headOrder: pick(random, ['NHD', 'HND'] as const),
  };
}

/** `count` block pairs: distinct destination blocks, any source blocks. */
function randomBlocks(random: (bound: number) => number, count: number) {
  const order = Array.from({ length: DESTINATION_BLOCKS }, (_, i) => i);
  for (let i = 0; i < count; i++) {
    const j = i + random(DESTINATION_BLOCKS - i);
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return {
    sourceBlocks: Uint32Array.from({ length: count }, () => random(SOURCE_BLOCKS)),
    destinationBlocks: Uint32Array.from(order.slice(0, count)),
  };
}

interface Workers {
  readonly source: RankSide[];
  /** The destination the template posts fill, and its twin the explicit posts fill. */
  readonly byTemplate: RankSide[];
  readonly explicit: RankSide[];
  readonly template: TransferTemplate;
}

async function openWorkers(
  backend: Backend,
  geometry: Geometry,
  sourceTp: number,
  destinationTp: number,
): Promise<Workers> {
  const ranks = (workerId: string, role: 'decode' | 'prefill', tpSize: number, blocks: number) =>
    Promise.all(
      Array.from({ length: tpSize }, (_, tpRank) =>
        openRank({ workerId, role, geometry, tpRank, tpSize, blocks, backend }),
      ),
    );
  const source = await ranks('decode-0', 'decode', sourceTp, SOURCE_BLOCKS);
  const byTemplate = await ranks('prefill-0', 'prefill', destinationTp, DESTINATION_BLOCKS);
  const explicit = await ranks('prefill-twin', 'prefill', destinationTp, DESTINATION_BLOCKS);
  source.forEach((rank, tpRank) => fillPattern(rank.allocation.view(), 40 + tpRank));
  for (const rank of [...byTemplate, ...explicit]) rank.allocation.view().fill(0);
  return { source, byTemplate, explicit, template: buildTransferTemplate(workerOf(source), workerOf(byTemplate)) };
}

async function closeWorkers(workers: Workers): Promise<void> {
  for (const rank of [...workers.source, ...workers.byTemplate, ...workers.explicit]) await closeRank(rank);
}

const regionIds = (rank: RankSide) => rank.regions.map((region) => region.id);

/**
 * Every rank pair moved twice: by the template registered natively and posted by block lists, and by
 * `materialize`'s explicit descriptors into the twin destination. READ pulls from the destination ranks'
 * agents, WRITE pushes from the source ranks'.
 */
async function moveBothWays(workers: Workers, direction: TransferDirection, blocks: ReturnType<typeof randomBlocks>) {
  const { template } = workers;
  const plan = materialize(template, blocks);
  const operations: Operation[] = [];
  const registered = template.pairs.map((pair, p) => {
    const source = workers.source[pair.sourceRank.tpRank] as RankSide;
    const destination = workers.byTemplate[pair.destinationRank.tpRank] as RankSide;
    const twin = workers.explicit[pair.destinationRank.tpRank] as RankSide;
    const [near, far, farTwin] = direction === 'read' ? [destination, source, source] : [source, destination, twin];
    const nearTwin = direction === 'read' ? twin : source;
    const handle = near.agent.registerTemplate({
      peer: near.agent.loadPeer(far.agent.metadata()),
      template,
      pair: p,
      direction,
      localRegions: near.regions,
      remoteRegions: regionIds(far),
    });
    operations.push(near.agent.postBlocks({ template: handle, ...blocks }));
    operations.push(
      nearTwin.agent.post({
        direction,
        peer: nearTwin.agent.loadPeer(farTwin.agent.metadata()),
        descriptors: plan.pairs[p] as (typeof plan.pairs)[number],
        localRegions: nearTwin.regions,
        remoteRegions: regionIds(farTwin),
      }),
    );
    return handle;
  });
  const results = await Promise.all(operations.map((operation) => operation.done));
  for (const operation of operations) operation.release();
  for (const handle of registered) handle.release();
  const moved = (parity: number) =>
    results.filter((_, i) => i % 2 === parity).reduce((sum, result) => sum + result.bytesDone, 0);
  return { byTemplate: moved(0), explicit: moved(1), planned: Number(plan.totalBytes) };
}

describe.each(testedBackends)('transfer templates on %s', (backend) => {
  it('move exactly the bytes of materialize + explicit posts, for random geometries, TPs, directions and blocks', async () => {
    for (let seed = 1; seed <= 8; seed++) {
      const random = randomSource(seed);
      const geometry = randomGeometry(random);
      const workers = await openWorkers(backend, geometry, pick(random, [1, 2]), pick(random, [1, 2]));
      const direction = pick<TransferDirection>(random, ['read', 'write']);
      const blocks = randomBlocks(random, 1 + random(Math.min(SOURCE_BLOCKS, DESTINATION_BLOCKS)));
      const moved = await moveBothWays(workers, direction, blocks);
      const context = JSON.stringify({ seed, geometry, direction, pairs: workers.template.pairs.length });
      expect({ byTemplate: moved.byTemplate, explicit: moved.explicit }, context).toEqual({
        byTemplate: moved.planned,
        explicit: moved.planned,
      });
      workers.byTemplate.forEach((rank, d) => {
        const twin = (workers.explicit[d] as RankSide).allocation.view();
        expect(rank.allocation.view().equals(twin), `${context}: destination rank ${d}`).toBe(true);
      });
      expect(
        workers.byTemplate.some((rank) => rank.allocation.view().some((byte) => byte !== 0)),
        context,
      ).toBe(true);
      await closeWorkers(workers);
    }
    expect(liveCounters()).toEqual(allZero);
  });
});

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

describe('registering and posting on a template refuses bad input with typed errors', () => {
  const open = async () => {
    const workers = await openWorkers('loopback', geometry, 2, 1);
    const destination = workers.byTemplate[0] as RankSide;
    const sources = workers.source.map((rank) => destination.agent.loadPeer(rank.agent.metadata()));
    const request = (p: number) => ({
      peer: sources[p] as (typeof sources)[number],
      template: workers.template,
      pair: p,
      direction: 'read' as const,
      localRegions: destination.regions,
      remoteRegions: regionIds(workers.source[p] as RankSide),
    });
    return { workers, destination, request };
  };

  it('names the pair, the template, foreign regions and routes out of bounds', async () => {
    const { workers, destination, request } = await open();
    const { pair: _, ...withoutPair } = request(0);
    expect(() => destination.agent.registerTemplate(withoutPair)).toThrow(InvalidArgumentError);
    expect(() => destination.agent.registerTemplate({ ...request(0), pair: 2 })).toThrow(/pair/);
    expect(() =>
      destination.agent.registerTemplate({ ...request(0), template: { ...workers.template, format: 2 } as never }),
    ).toThrow(InvalidArgumentError);
    const foreign = workers.explicit[0] as RankSide;
    expect(() => destination.agent.registerTemplate({ ...request(0), localRegions: foreign.regions })).toThrow(
      ForeignHandleError,
    );
    // A missing peer or region list: a typed refusal naming it, not a TypeError.
    for (const [argument, value] of [
      ['peer', undefined],
      ['peer', { id: 0 }],
      ['localRegions', undefined],
      ['remoteRegions', undefined],
    ] as const) {
      expect(() => destination.agent.registerTemplate({ ...request(0), [argument]: value as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument }),
      );
    }
    // A deregistered bank's region, as its `region` reads once gone: a typed refusal, not a TypeError.
    expect(() =>
      destination.agent.registerTemplate({
        ...request(0),
        localRegions: [undefined as never, ...destination.regions.slice(1)],
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'localRegions[0]' }));
    // A 64-byte region as bank 0: route 0 cannot fit its largest block.
    const scratch = await destination.agent.allocate(4096);
    const tiny = destination.agent.register({ address: scratch.address, bytes: 64 });
    const error = (() => {
      try {
        destination.agent.registerTemplate({ ...request(0), localRegions: [tiny, ...destination.regions.slice(1)] });
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(NativeTransportError);
    expect(error).toMatchObject({
      code: 'INVALID_PARAM',
      call: 'kvt_template_register',
      detail: expect.stringMatching(/route 0: local region \d+: .* exceeds region length 64/),
    });
    await tiny.deregister();
    await scratch.free();
    await closeWorkers(workers);
    expect(liveCounters()).toEqual(allZero);
  });

  it('checks block lists before posting (nothing posted), and a template dies with its peer generation', async () => {
    const { workers, destination, request } = await open();
    const handle = destination.agent.registerTemplate(request(1));
    expect(handle).toMatchObject({ pair: 1, direction: 'read', generation: request(1).peer.generation });
    const post = (sourceBlocks: number[], destinationBlocks: number[]) =>
      destination.agent.postBlocks({
        template: handle,
        sourceBlocks: Uint32Array.from(sourceBlocks),
        destinationBlocks: Uint32Array.from(destinationBlocks),
      });
    expect(() => post([0, SOURCE_BLOCKS], [0, 1])).toThrow(BlockOutOfRangeError);
    expect(() => post([0, 1], [0, DESTINATION_BLOCKS])).toThrow(BlockOutOfRangeError);
    expect(() => post([0, 1], [3, 3])).toThrow(DuplicateDestinationBlockError);
    expect(() => post([], [])).toThrow(InvalidArgumentError);
    expect(() =>
      destination.agent.postBlocks({
        template: {} as never,
        sourceBlocks: Uint32Array.of(0),
        destinationBlocks: Uint32Array.of(0),
      }),
    ).toThrow(InvalidArgumentError);
    const twin = workers.explicit[0] as RankSide;
    expect(() =>
      twin.agent.postBlocks({
        template: handle,
        sourceBlocks: Uint32Array.of(0),
        destinationBlocks: Uint32Array.of(0),
      }),
    ).toThrow(ForeignHandleError);
    expect(destination.agent.counters().operationsPosted).toBe(0);

    const done = post([4, 0], [0, 5]);
    // Pair 1 carries one of the two heads, half of every block's bytes: two block pairs move one block's worth.
    await expect(done.done).resolves.toEqual({ bytesDone: Number(handle.template.blockBytes) });
    done.release();

    // The source registers more memory: its metadata generation moves on, and so does the peer's.
    const source = workers.source[1] as RankSide;
    const extraBank = await source.agent.allocate(4096);
    const extra = source.agent.register(extraBank);
    const peer = destination.agent.loadPeer(source.agent.metadata());
    expect(peer.generation).toBeGreaterThan(handle.generation);
    expect(() => post([0], [0])).toThrow(expect.objectContaining({ code: 'NOT_FOUND', call: 'kvt_xfer_post_blocks' }));
    const again = destination.agent.registerTemplate(request(1));
    const moved = destination.agent.postBlocks({
      template: again,
      sourceBlocks: Uint32Array.of(1),
      destinationBlocks: Uint32Array.of(2),
    });
    await moved.done;
    moved.release();

    handle.release();
    handle.release();
    expect(() => post([0], [0])).toThrow(HandleClosedError);
    await extra.deregister();
    await extraBank.free();
    await closeWorkers(workers);
    expect(again.isOpen).toBe(false); // destroyed with its agent
    expect(liveCounters()).toEqual(allZero);
  });
});
