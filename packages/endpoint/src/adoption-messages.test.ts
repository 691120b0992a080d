import { describe, expect, it } from 'vitest';
import { testGeometry } from '../test/support/endpoint-workers.js';
import { blockHashScheme, hashBlockChain } from '@kvreuse/inventory';
import { adoptedAnswer, chainStored, parseEngineMessage, refusedAnswer } from './adoption-messages.js';

const bytes = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));
const layout = { workerId: 'engine-0', geometry: testGeometry, blocks: 8 };
const vramLayout = { ...layout, memory: 'vram', device: 0, ipcHandle: Buffer.alloc(64).toString('base64') };

describe('the adoption messages', () => {
  it('reads an adopt with its defaults and 64-bit hashes written as strings, exactly', () => {
    const parsed = parseEngineMessage(
      bytes({
        type: 'adopt',
        version: 1,
        layout,
        stored: [
          { block: 0, hash: '18446744073709551615' },
          { block: 7, hash: '0xfedcba9876543210' },
        ],
      }),
      1,
    );
    expect(parsed).toEqual({
      ok: true,
      message: {
        type: 'adopt',
        layout: {
          memory: { kind: 'dram' },
          workerId: 'engine-0',
          incarnation: undefined,
          role: 'decode',
          geometry: testGeometry,
          tpSize: 1,
          ppSize: 1,
          dpRank: 0,
          tpRank: 0,
          ppRank: 0,
          blocks: 8,
          blockStride: undefined,
          planeStride: undefined,
          start: 0,
        },
        stored: [
          { block: 0, hash: 2n ** 64n - 1n },
          { block: 7, hash: 0xfedcba9876543210n },
        ],
        sequences: [],
      },
    });
  });

  it('reads an adopt of GPU memory: its device, CUDA IPC handle and where its banks start, no descriptor', () => {
    const handle = Buffer.alloc(64, 7);
    const vram = { ...layout, memory: 'vram', device: 3, ipcHandle: handle.toString('base64'), start: 8192 };
    expect(parseEngineMessage(bytes({ type: 'adopt', layout: vram }), 0)).toMatchObject({
      ok: true,
      message: { type: 'adopt', layout: { memory: { kind: 'vram', device: 3, ipcHandle: handle }, start: 8192 } },
    });
  });

  it('reads a blocks update', () => {
    expect(parseEngineMessage(bytes({ type: 'blocks', stored: [{ block: 3, hash: '5' }], removed: [1] }), 0)).toEqual({
      ok: true,
      message: { type: 'blocks', stored: [{ block: 3, hash: 5n }], sequences: [], removed: [1] },
    });
  });

  it.each([
    ['{', 1, 'malformed-json'],
    [[1], 1, 'malformed-json'],
    [{ type: 'adopt', version: 2, layout }, 1, 'unsupported-version'],
    [{ type: 'detach' }, 0, 'unknown-type'],
    [{ type: 'adopt', layout }, 0, 'missing-memfd'],
    [{ type: 'adopt', layout }, 2, 'unexpected-fds'],
    [{ type: 'blocks' }, 1, 'unexpected-fds'],
    [{ type: 'adopt', layout: { ...vramLayout, ipcHandle: undefined } }, 0, 'bad-ipc-handle'],
    [{ type: 'adopt', layout: { ...vramLayout, ipcHandle: Buffer.alloc(63).toString('base64') } }, 0, 'bad-ipc-handle'],
    [{ type: 'adopt', layout: { ...vramLayout, ipcHandle: '*'.repeat(88) } }, 0, 'bad-ipc-handle'],
    [{ type: 'adopt', layout: { ...vramLayout, device: -1 } }, 0, 'bad-layout'],
    [{ type: 'adopt', layout: { ...vramLayout, memory: 'hbm' } }, 0, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, device: 0 } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: vramLayout }, 1, 'unexpected-fds'],
    [{ type: 'adopt', layout: { ...layout, workerId: 'has space' } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, geometry: { ...testGeometry, dtype: 'fp64' } } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, tpRank: 1 } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, blocks: 0 } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, start: -1 } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout: { ...vramLayout, start: 0.5 } }, 0, 'bad-layout'],
    [{ type: 'adopt', layout: { ...layout, sequences: [] } }, 1, 'bad-layout'],
    [{ type: 'adopt', layout, stored: [{ block: 8, hash: '1' }] }, 1, 'bad-blocks'],
    [{ type: 'adopt', layout, stored: [{ block: 0, hash: '18446744073709551616' }] }, 1, 'bad-blocks'],
    [{ type: 'blocks', stored: [{ block: 0, hash: 1 }] }, 0, 'bad-blocks'],
    [{ type: 'blocks', removed: [-1] }, 0, 'bad-blocks'],
    [{ type: 'blocks', sequences: [{ blocks: [0], tokens: [-1] }] }, 0, 'bad-blocks'],
    [{ type: 'adopt', layout, sequences: {} }, 1, 'bad-blocks'],
  ])('refuses %j with %i descriptors as %s', (message, fds, reason) => {
    expect(parseEngineMessage(bytes(message), fds)).toMatchObject({ ok: false, reason, detail: expect.any(String) });
  });

  it('hashes token sequences into kvreuse chain hashes, one block per full block of tokens', () => {
    const scheme = blockHashScheme(testGeometry, 'model-a');
    const tokens = Array.from({ length: 9 }, (_, i) => 100 + i); // two full blocks of 4, and one token
    const chain = hashBlockChain(tokens, scheme);
    expect(chainStored([{ blocks: [5, 2], tokens }], scheme, 8)).toEqual([
      { block: 5, hash: chain[0] },
      { block: 2, hash: chain[1] },
    ]);
    expect(chainStored([{ blocks: [5], tokens }], scheme, 8)).toBe(
      'sequences[0] names 1 blocks for 2 full blocks of 4 tokens',
    );
    expect(chainStored([{ blocks: [5, 8], tokens }], scheme, 8)).toBe(
      'sequences[0] names block 8, outside the 8 blocks of a bank',
    );
  });

  it('writes the answers', () => {
    expect(JSON.parse(refusedAnswer('too-small', 'needs 16384 bytes'))).toEqual({
      type: 'refused',
      version: 1,
      reason: 'too-small',
      message: 'needs 16384 bytes',
    });
    expect(JSON.parse(adoptedAnswer('e', 'e-1', [{ offset: 0, bytes: 1024 }]))).toEqual({
      type: 'adopted',
      version: 1,
      workerId: 'e',
      incarnation: 'e-1',
      banks: [{ offset: 0, bytes: 1024 }],
    });
  });
});
