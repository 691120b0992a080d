// An engine as the sidecar tests need it, as its own process: it owns one TP-1 rank of host memory in a
// memfd (the banks of the endpoint tests' geometry, laid out as the adoption protocol says, bytes as a
// serving test worker's), hands it to the sidecar at the socket path it is given and reports the answer.
// Commands on stdin, one JSON line each: `{"blocks": {...}}` sends a blocks message; `{"close": true}`
// closes the connection. Otherwise it keeps the connection (and its memory) until it is killed.
import { createInterface } from 'node:readline';
import { layoutRankBanks } from '@kvreuse/descriptors';
import { FileMemory, loadTransport } from '@kvreuse/native-bindings';
import { BLOCKS, chain, testGeometry } from '../support/endpoint-workers.js';
import { fillDeterministic } from '../workers.js';

const [path = '', workerId = 'engine-0'] = process.argv.slice(2);
const specs = layoutRankBanks(
  testGeometry,
  { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 },
  { address: 0n, blocks: BLOCKS },
);
const last = specs.at(-1)!;
const memory = FileMemory.create(Number(last.address + last.bytes));
for (const [index, spec] of specs.entries())
  fillDeterministic(memory.view().subarray(Number(spec.address), Number(spec.address + spec.bytes)), 0, index);
const client = loadTransport().connectSidecar(path);
const layout = { workerId, role: 'decode', geometry: testGeometry, tpSize: 1, blocks: BLOCKS };
const answer = client.adopt(memory.fd, { ...layout, memory: 'dram' }, 60_000);
client.send({ type: 'blocks', stored: chain.map((hash, block) => ({ block, hash: `0x${hash.toString(16)}` })) });
process.stdout.write(`${JSON.stringify({ event: 'adopted', answer, pid: process.pid })}\n`);
const commands = createInterface({ input: process.stdin });
const alive = setInterval(() => {}, 1 << 30);
commands.on('line', (line) => {
  const command = JSON.parse(line) as { blocks?: object; close?: boolean };
  if (command.blocks !== undefined) client.send({ type: 'blocks', ...command.blocks });
  if (command.close === true) {
    client.close();
    memory.close();
    commands.close();
    clearInterval(alive);
  }
});
