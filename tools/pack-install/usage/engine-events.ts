import { EngineBatchDecoder, hashVllmBlockChain, vllmIntBlockHash, vllmNoneHash } from '@kvreuse/engine-events';

// An older vLLM's positional batch [1.5, [["BlockRemoved", [2^64 − 1], "GPU"]], 0], as msgpack bytes.
const text = (s: string): number[] => [0xa0 | s.length, ...Buffer.from(s)];
const payload = Uint8Array.from([
  0x93,
  ...[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0],
  0x91,
  0x93,
  ...text('BlockRemoved'),
  0x91,
  ...[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
  ...text('GPU'),
  0x00,
]);
const decoded = new EngineBatchDecoder().decode(payload);
const removed = decoded.ok ? decoded.batch.events[0] : undefined;
const [first] = hashVllmBlockChain([0, 1, 2, 3], { blockSize: 4, noneHash: vllmNoneHash('0') });
console.log(
  JSON.stringify({
    type: removed?.type,
    hash: removed?.type === 'BlockRemoved' ? String(removed.blockHashes[0]) : undefined,
    rank: decoded.ok ? decoded.batch.dataParallelRank : undefined,
    vllmHash: String(vllmIntBlockHash(first!)),
  }),
);
