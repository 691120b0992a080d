import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { elementSize, firstDifference, holds, simulation } from '../test/simulation.js';
import { workerFor } from '../test/support.js';
import { referencePlan } from '../test/reference-planner.js';
import {
  buildTransferTemplate,
  dtypes,
  type Geometry,
  materialize,
  type TransferTemplate,
  type Worker,
} from './index.js';

const powersOfTwo = [1, 2, 4, 8] as const;
const divisorsOf = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1).filter((d) => n % d === 0);

const scenario = fc
  .record({
    numKvHeads: fc.constantFrom(1, 2, 4),
    numLayers: fc.constantFrom(1, 2, 3, 4, 6),
    kvPlanes: fc.constantFrom(1 as const, 2 as const),
    blockTokens: fc.integer({ min: 1, max: 3 }),
    headDim: fc.integer({ min: 1, max: 3 }),
    dtype: fc.constantFrom(...dtypes),
    headOrder: fc.constantFrom('NHD' as const, 'HND' as const),
    sourceLayout: fc.constantFrom('layer-separate' as const, 'fully-contiguous' as const),
    destinationLayout: fc.constantFrom('layer-separate' as const, 'fully-contiguous' as const),
    sourceTp: fc.constantFrom(...powersOfTwo),
    destinationTp: fc.constantFrom(...powersOfTwo),
    ppChoice: fc.tuple(fc.nat(), fc.nat()),
    sourceBlocks: fc.integer({ min: 1, max: 5 }),
    destinationBlocks: fc.integer({ min: 1, max: 5 }),
    sourcePadding: fc.integer({ min: 0, max: 5 }),
    destinationPadding: fc.integer({ min: 0, max: 5 }),
    // Layer-separate banks only: one bank per (layer, plane), or one per layer with the planes
    // interleaved in each block (vLLM's (blocks, 2, …)) or split after all blocks ((2, blocks, …)).
    sourcePlanes: fc.constantFrom('separate' as const, 'interleaved' as const, 'split' as const),
    destinationPlanes: fc.constantFrom('separate' as const, 'interleaved' as const, 'split' as const),
    sourcePlanePadding: fc.integer({ min: 0, max: 3 }),
    destinationPlanePadding: fc.integer({ min: 0, max: 3 }),
  })
  .chain((s) => {
    const layerDivisors = divisorsOf(s.numLayers);
    const sourcePp = layerDivisors[s.ppChoice[0] % layerDivisors.length]!;
    const destinationPp = layerDivisors[s.ppChoice[1] % layerDivisors.length]!;
    const pairs = fc
      .uniqueArray(fc.integer({ min: 0, max: s.destinationBlocks - 1 }), {
        minLength: 1,
        maxLength: s.destinationBlocks,
      })
      .chain((destinations) =>
        fc
          .array(fc.integer({ min: 0, max: s.sourceBlocks - 1 }), {
            minLength: destinations.length,
            maxLength: destinations.length,
          })
          .map((sources) => destinations.map((destination, i) => [sources[i]!, destination] as [number, number])),
      );
    return pairs.map((blocks) => ({ ...s, sourcePp, destinationPp, blocks }));
  });

/** Worker options for a plane layout of layer-separate banks (fully-contiguous banks ignore it). */
function planeLayout(
  geometry: Geometry,
  tpSize: number,
  blocks: number,
  planes: 'separate' | 'interleaved' | 'split',
  stridePadding: number,
  planePadding: number,
): { planeStride?: number; blockStride?: number } {
  if (geometry.bankLayout !== 'layer-separate' || planes === 'separate') return {};
  const headsPerRank = tpSize <= geometry.numKvHeads ? geometry.numKvHeads / tpSize : 1;
  const piece = geometry.blockTokens * headsPerRank * geometry.headDim * elementSize[geometry.dtype];
  if (planes === 'interleaved') return { planeStride: piece + planePadding };
  const blockStride = piece + stridePadding;
  return { blockStride, planeStride: blocks * blockStride + planePadding };
}

/** Routes whose last row, for the largest block each side's limit allows, would end past its bank. */
function routesBeyondTheirBanks(template: TransferTemplate, source: Worker, destination: Worker): string[] {
  const beyond: string[] = [];
  template.pairs.forEach((_pair, p) => {
    for (let r = template.pairRouteStart[p]!; r < template.pairRouteStart[p + 1]!; r++) {
      const lastRow = BigInt(template.rows[r]! - 1);
      const sourceEnd =
        template.sourceBase[r]! +
        BigInt(template.sourceLimit.blocks - 1) * template.sourceBlockStride[r]! +
        lastRow * template.sourceRowStride[r]! +
        template.rowBytes[r]!;
      const destinationEnd =
        template.destinationBase[r]! +
        BigInt(template.destinationLimit.blocks - 1) * template.destinationBlockStride[r]! +
        lastRow * template.destinationRowStride[r]! +
        template.rowBytes[r]!;
      if (sourceEnd > source.ranks[template.pairSourceRank[p]!]!.banks[template.sourceBank[r]!]!.bytes)
        beyond.push(`source, route ${r}`);
      if (
        destinationEnd > destination.ranks[template.pairDestinationRank[p]!]!.banks[template.destinationBank[r]!]!.bytes
      )
        beyond.push(`destination, route ${r}`);
    }
  });
  return beyond;
}

describe('referencePlan and transfer templates, executed over simulated banks', () => {
  it('yield exactly the destination contents the geometry defines, coalesced or not, touching nothing else; materialize equals referencePlan', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const base = {
          numLayers: s.numLayers,
          kvPlanes: s.kvPlanes,
          blockTokens: s.blockTokens,
          numKvHeads: s.numKvHeads,
          headDim: s.headDim,
          dtype: s.dtype,
          headOrder: s.headOrder,
        };
        const sourceGeometry: Geometry = { ...base, bankLayout: s.sourceLayout };
        const destinationGeometry: Geometry = { ...base, bankLayout: s.destinationLayout };
        const source = workerFor({
          geometry: sourceGeometry,
          tpSize: s.sourceTp,
          ppSize: s.sourcePp,
          blocks: s.sourceBlocks,
          stridePadding: s.sourcePadding,
          ...planeLayout(
            sourceGeometry,
            s.sourceTp,
            s.sourceBlocks,
            s.sourcePlanes,
            s.sourcePadding,
            s.sourcePlanePadding,
          ),
        });
        const destination = workerFor({
          geometry: destinationGeometry,
          tpSize: s.destinationTp,
          ppSize: s.destinationPp,
          blocks: s.destinationBlocks,
          stridePadding: s.destinationPadding,
          role: 'prefill',
          ...planeLayout(
            destinationGeometry,
            s.destinationTp,
            s.destinationBlocks,
            s.destinationPlanes,
            s.destinationPadding,
            s.destinationPlanePadding,
          ),
        });

        const coalesced = referencePlan(source, destination, s.blocks);
        const separate = referencePlan(source, destination, s.blocks, { coalesce: false });
        const { expected, run, runTemplate } = simulation(source, destination, s.blocks);
        expect(firstDifference(run(coalesced), expected)).toBeUndefined();
        expect(firstDifference(run(separate), expected)).toBeUndefined();

        // The template path: its segments, executed as they are, and its materialized descriptors.
        const template = buildTransferTemplate(source, destination);
        const lists = {
          sourceBlocks: Uint32Array.from(s.blocks, ([from]) => from),
          destinationBlocks: Uint32Array.from(s.blocks, ([, to]) => to),
        };
        expect(firstDifference(runTemplate(template), expected)).toBeUndefined();
        expect(materialize(template, lists)).toEqual(coalesced);
        expect(materialize(template, lists, { coalesce: false })).toEqual(separate);
        expect(BigInt(s.blocks.length) * template.blockBytes).toBe(coalesced.totalBytes);
        expect(routesBeyondTheirBanks(template, source, destination)).toEqual([]);
        const elementBytes = elementSize[s.dtype];
        const perRankBlock = destination.ranks.map((part) => {
          const held = holds(destinationGeometry, part);
          return held.layerCount * s.kvPlanes * held.headCount * s.blockTokens * s.headDim * elementBytes;
        });
        const expectedBytes = BigInt(s.blocks.length * perRankBlock.reduce((a, b) => a + b, 0));
        expect(coalesced.totalBytes).toBe(expectedBytes);
        expect(separate.totalBytes).toBe(expectedBytes);
        expect(coalesced.descriptorCount).toBeLessThanOrEqual(separate.descriptorCount);
      }),
      { numRuns: 150 },
    );
  }, 120_000);

  it('coalesces a whole run of consecutive blocks into one descriptor per bank when both sides are dense and alike', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('layer-separate' as const, 'fully-contiguous' as const),
        fc.integer({ min: 1, max: 8 }),
        (bankLayout, run) => {
          const geometry: Geometry = {
            numLayers: 4,
            kvPlanes: 2,
            blockTokens: 4,
            numKvHeads: 2,
            headDim: 4,
            dtype: 'fp16',
            bankLayout,
            headOrder: 'NHD',
          };
          const source = workerFor({ geometry, tpSize: 2, ppSize: 2, blocks: 16 });
          const destination = workerFor({ geometry, tpSize: 2, ppSize: 2, blocks: 16, role: 'prefill' });
          const plan = referencePlan(
            source,
            destination,
            Array.from({ length: run }, (_, i) => [3 + i, 5 + i] as [number, number]),
          );
          const banksPerRank = bankLayout === 'layer-separate' ? 2 * 2 : 1;
          expect(plan.descriptorCount).toBe(4 * banksPerRank);
        },
      ),
    );
  });
});
