import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  assembleWorker,
  buildTransferTemplate,
  checkCompatibility,
  geometryDigest,
  materialize,
  parseRankPart,
  referenceGeometries,
  serializeRankPart,
  type Worker,
} from '@kvreuse/descriptors';

// The example workers the demo ships with, read through the public API of @kvreuse/descriptors.
const examples = new URL('../examples/', import.meta.url);

function exampleWorker(file: string): Worker {
  const wire: unknown = JSON.parse(readFileSync(new URL(file, examples), 'utf8'));
  expect(Array.isArray(wire)).toBe(true);
  const parts = (wire as unknown[]).map(parseRankPart);
  expect(parts.map(serializeRankPart)).toEqual(wire);
  const result = assembleWorker(parts);
  if (!result.complete) throw new Error(`${file} is incomplete: ${JSON.stringify(result)}`);
  return result.worker;
}

describe('bundled example workers', () => {
  const decode = exampleWorker('qwen3-0.6b-decode-tp2.json');
  const prefill = exampleWorker('qwen3-0.6b-prefill-tp1.json');

  it('are complete Qwen3-0.6B workers: decode TP=2, prefill TP=1, page-aligned layer-separate HND banks', () => {
    expect([decode.role, decode.tpSize, prefill.role, prefill.tpSize]).toEqual(['decode', 2, 'prefill', 1]);
    expect(decode.geometryDigest).toBe(geometryDigest(referenceGeometries['qwen3-0.6b']));
    expect(prefill.geometryDigest).toBe(decode.geometryDigest);
    for (const bank of [...decode.ranks, ...prefill.ranks].flatMap((part) => part.banks)) {
      expect(bank.address % 4096n).toBe(0n);
      expect(bank.blocks).toBeGreaterThan(42);
    }
  });

  it('are compatible, and the 42-block prefix from decode to prefill is 308,281,344 bytes', () => {
    expect(checkCompatibility(decode, prefill).ok).toBe(true);
    const blocks = Uint32Array.from({ length: 42 }, (_, i) => i);
    const plan = materialize(buildTransferTemplate(decode, prefill), {
      sourceBlocks: blocks,
      destinationBlocks: blocks,
    });
    expect(plan.totalBytes).toBe(308_281_344n);
    expect(plan.pairs.map((pair) => pair.count)).toEqual([2352, 2352]);
  });
});
