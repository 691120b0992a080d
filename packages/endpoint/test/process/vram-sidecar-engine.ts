// An engine whose KV memory is GPU memory, as its own process over the fake CUDA driver named in
// KVT_CUDA_LIBRARY: one TP-1 rank of the endpoint tests' geometry in one vram allocation (its banks laid out
// from 4 KiB into it as the adoption protocol says, bytes as a serving test worker's, copied up through the driver), handed to
// the sidecar at the socket path it is given by its CUDA IPC handle, no descriptor. It reports the answer
// with the inode of its allocation's memfd (the fake's device memory: how another process's mapping of it is
// found in /proc/<pid>/maps), and keeps the connection (and its memory) until it is killed.
import { readFileSync } from 'node:fs';
import { layoutRankBanks } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { BLOCKS, chain, testGeometry } from '../support/endpoint-workers.js';
import { fillDeterministic } from '../workers.js';

const [path = ''] = process.argv.slice(2);
const transport = loadTransport();
// The KV memory begins past the allocation's start, as a tensor carved from a caching allocator's block does.
const start = 4096;
const specs = layoutRankBanks(
  testGeometry,
  { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 },
  { address: BigInt(start), blocks: BLOCKS, memKind: 'vram', deviceId: 0 },
);
const last = specs.at(-1)!;
const agent = await transport.createAgent({ name: `vram-engine-${process.pid}`, backend: 'loopback' });
const memory = agent.allocateVram(0, last.address + last.bytes);
for (const [index, spec] of specs.entries()) {
  const bytes = new Uint8Array(Number(spec.bytes));
  fillDeterministic(bytes, 0, index);
  memory.write(bytes, Number(spec.address));
}
const client = transport.connectSidecar(path);
const layout = { workerId: 'engine-gpu', role: 'decode', geometry: testGeometry, tpSize: 1, blocks: BLOCKS };
const ipcHandle = memory.ipcHandle().toString('base64');
const answer = client.adopt(undefined, { ...layout, start, memory: 'vram', device: 0, ipcHandle }, 60_000);
client.send({ type: 'blocks', stored: chain.map((hash, block) => ({ block, hash: `0x${hash.toString(16)}` })) });
const base = memory.address.toString(16);
const mapping = readFileSync('/proc/self/maps', 'utf8')
  .split('\n')
  .find((line) => line.startsWith(`${base}-`));
const inode = mapping?.split(/\s+/)[4];
process.stdout.write(`${JSON.stringify({ event: 'adopted', answer, inode })}\n`);
setInterval(() => {}, 1 << 30);
