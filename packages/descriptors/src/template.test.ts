import { describe, expect, it } from 'vitest';
import { rankPartsFor, workerFor } from '../test/support.js';
import {
  assembleWorker,
  buildTransferTemplate,
  checkCompatibility,
  type Geometry,
  IncompatibleWorkersError,
  referenceGeometries,
  transferTemplateFormat,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];

describe('buildTransferTemplate', () => {
  const decodeTp2 = workerFor({ geometry: qwen, tpSize: 2, ppSize: 1, blocks: 64 });
  const prefillTp1 = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 48, role: 'prefill' });

  it('holds one route per (rank pair, layer, plane) with banks, bases, block strides and one HND segment', () => {
    const template = buildTransferTemplate(decodeTp2, prefillTp1);
    expect(template).toMatchObject({
      format: transferTemplateFormat,
      source: { workerId: 'decode-worker', incarnation: 'decode-worker-incarnation' },
      destination: { workerId: 'prefill-worker', incarnation: 'prefill-worker-incarnation' },
      sourceLimit: { blocks: 64, rank: { tpRank: 0, ppRank: 0 }, bank: 0 },
      destinationLimit: { blocks: 48, rank: { tpRank: 0, ppRank: 0 }, bank: 0 },
      routeCount: 2 * 28 * 2,
      blockBytes: 7_340_032n,
    });
    expect([...template.pairSourceRank, ...template.pairDestinationRank, ...template.pairRouteStart]).toEqual([
      0, 1, 0, 0, 0, 56, 112,
    ]);
    // Route 56 + 3: rank 1's layer 1, plane 1 lands in the second half of each 131,072-byte destination piece.
    const r = 59;
    expect([template.layer[r], template.plane[r], template.sourceBank[r], template.destinationBank[r]]).toEqual([
      1, 1, 3, 3,
    ]);
    expect([
      template.sourceBase[r],
      template.destinationBase[r],
      template.sourceBlockStride[r],
      template.destinationBlockStride[r],
    ]).toEqual([0n, 65_536n, 65_536n, 131_072n]);
    expect([
      template.rows[r],
      template.rowBytes[r],
      template.sourceRowStride[r],
      template.destinationRowStride[r],
    ]).toEqual([1, 65_536n, 65_536n, 65_536n]);
    // Per route five 32-bit and seven 64-bit fields; per pair two ranks; pairs + 1 route starts.
    expect(template.byteLength).toBe(112 * (5 * 4 + 7 * 8) + 2 * 2 * 4 + 3 * 4);
  });

  it('describes a per-token NHD split as one segment per route: rows of the route heads, strided by each side’s heads', () => {
    const nhd: Geometry = { ...qwen, headOrder: 'NHD' };
    const template = buildTransferTemplate(
      workerFor({ geometry: nhd, tpSize: 2, ppSize: 1, blocks: 4 }),
      workerFor({ geometry: nhd, tpSize: 1, ppSize: 1, blocks: 4, role: 'prefill' }),
    );
    const r = 56;
    expect([
      template.rows[r],
      template.rowBytes[r],
      template.sourceRowStride[r],
      template.destinationRowStride[r],
      template.destinationBase[r],
    ]).toEqual([64, 1024n, 1024n, 2048n, 1024n]);
    expect(template.routeCount).toBe(112);
  });

  it('reads plane-strided banks: one bank per layer, plane 1 at the plane stride', () => {
    const interleaved = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 8, planeStride: 131_072 });
    const template = buildTransferTemplate(interleaved, prefillTp1);
    expect([
      template.sourceBank[3],
      template.sourceBase[3],
      template.sourceBlockStride[3],
      template.destinationBank[3],
    ]).toEqual([1, 131_072n, 262_144n, 3]);
    expect(template.sourceLimit).toEqual({ blocks: 8, rank: { tpRank: 0, ppRank: 0 }, bank: 0 });
  });

  it('names the bank with the fewest blocks as the limit of each side', () => {
    const parts = rankPartsFor({ geometry: { ...qwen, numLayers: 2 }, tpSize: 2, ppSize: 2, blocks: 8 });
    parts[3] = { ...parts[3]!, banks: parts[3]!.banks.map((bank, b) => (b === 1 ? { ...bank, blocks: 5 } : bank)) };
    const assembled = assembleWorker(parts);
    if (!assembled.complete) throw new Error('expected a complete worker');
    const fewer = assembled.worker;
    const template = buildTransferTemplate(
      fewer,
      workerFor({ geometry: { ...qwen, numLayers: 2 }, tpSize: 1, ppSize: 1, blocks: 8, role: 'prefill' }),
    );
    expect(template.sourceLimit).toEqual({ blocks: 5, rank: { tpRank: 1, ppRank: 1 }, bank: 1 });
  });

  it('refuses incompatible workers with the reasons', () => {
    const llama = workerFor({ geometry: referenceGeometries['llama-3.1-8b'], tpSize: 1, ppSize: 1, blocks: 8 });
    expect(() => buildTransferTemplate(llama, prefillTp1)).toThrow(IncompatibleWorkersError);
    expect(() => buildTransferTemplate(llama, prefillTp1)).toThrow(/NUM_LAYERS_MISMATCH/);
  });
});

describe('buildTransferTemplate over hand-built workers', () => {
  it('places pieces by the rank parts it checked, not by reading a part again', () => {
    const spec = { geometry: { ...qwen, numLayers: 1 }, tpSize: 1, ppSize: 1, blocks: 4, planeStride: 131_072 };
    const source = workerFor(spec);
    const destination = workerFor({ ...spec, role: 'prefill' });
    const [part] = rankPartsFor({ ...spec, role: 'prefill' });
    const bank = part!.banks[0]!;
    // A getter that gives the checked planeStride for as many reads as the check makes, then another.
    let reads = 0;
    let checkedReads = Infinity;
    const shifty = Object.defineProperty({ ...bank }, 'planeStride', {
      enumerable: true,
      get: () => (++reads <= checkedReads ? bank.planeStride : 2n ** 60n),
    });
    const handBuilt = { ...destination, ranks: [{ ...part!, banks: [shifty] }] };
    expect(checkCompatibility(source, handBuilt).ok).toBe(true);
    checkedReads = reads;
    reads = 0;
    expect(buildTransferTemplate(source, handBuilt)).toEqual(buildTransferTemplate(source, destination));
  });
});
