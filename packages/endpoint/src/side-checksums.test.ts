import { buildTransferTemplate, type Geometry } from '@kvreuse/descriptors';
import type { Agent, BlockChecksumsRequest, Region } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { fillDeterministic, rankBankBytes, testWorker } from '../test/workers.js';
import { blockChecksums } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';
import { sideChecksums } from './side-checksums.js';

const geometry: Geometry = {
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 3,
  numKvHeads: 2,
  headDim: 2,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};
const source = testWorker(geometry, 1, 3, 'src');
const template = buildTransferTemplate(source, testWorker(geometry, 1, 3, 'dst'));
const bytes = rankBankBytes(source, 0);
bytes.forEach((bank, index) => fillDeterministic(bank, 0, index));
const blocks = Uint32Array.from([2, 0]);
const bankCount = bytes.length;
const regions = Array.from({ length: bankCount }, (_, index) => ({ id: 100 + index }) as Region);
const banksOf = (memKind: 'dram' | 'vram') =>
  Array.from({ length: bankCount }, (_, index) => ({ index, memKind, region: regions[index] }));

/** The agent's native call, recorded: it answers fixed 64-bit sums (the native layer is tested in native-bindings). */
function recordingAgent(sums: bigint[]) {
  const calls: BlockChecksumsRequest[] = [];
  const agent: Pick<Agent, 'blockChecksums'> = {
    blockChecksums: (request) => {
      calls.push(request);
      return BigUint64Array.from(sums);
    },
  };
  return { agent, calls };
}

describe('sideChecksums', () => {
  it('sums dram banks as blockChecksums does (CRC-32 of the bytes), without the agent', () => {
    const { agent, calls } = recordingAgent([]);
    const sums = sideChecksums(template, 0, 'source', { bytes, banks: banksOf('dram'), agent }, blocks);
    expect([...sums]).toEqual([...blockChecksums(template, 0, 'source', bytes, blocks)]);
    expect(calls).toEqual([]);
  });

  it('has the agent sum vram banks where they are, the regions by bank number, each sum folded to 32 bits', () => {
    const { agent, calls } = recordingAgent([0x1234_5678_9abc_def0n, 0xffff_ffff_0000_0001n]);
    const sums = sideChecksums(template, 0, 'destination', { bytes: [], banks: banksOf('vram'), agent }, blocks);
    expect([...sums]).toEqual([(0x1234_5678 ^ 0x9abc_def0) >>> 0, 0xffff_fffe]);
    expect(calls).toEqual([{ template, pair: 0, side: 'destination', regions, blocks }]);
  });

  it('refuses vram banks without an agent to sum them', () => {
    expect(() => sideChecksums(template, 0, 'source', { bytes, banks: banksOf('vram') }, blocks)).toThrow(
      EndpointOptionError,
    );
  });
});
