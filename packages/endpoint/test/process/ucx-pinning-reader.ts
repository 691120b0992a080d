// An honest reader as its own process: a prefill worker of TP 1 on ucx, publishing to the SQLite
// discovery file it is given, that pulls the first 4 blocks of the chain from the named source with its
// completions held back, so that it holds its pins; it reports `pinned` (with its agent's name) once
// its reads are posted, and stays until killed.
import { openSqliteDiscovery } from '@kvreuse/discovery';
import { hintFor, ucxPrefill } from '../support/endpoint-workers.js';

const [path = '', incarnation = '', epoch = '0'] = process.argv.slice(2);
const store = await openSqliteDiscovery(path);
const prefill = await ucxPrefill(store, path, []);
const reader = prefill.ranks[0]!;
reader.agent.faults.delayCompletions('forever');
void reader.endpoint.pull({
  hint: hintFor({ workerId: 'decode-0', incarnation, epoch: Number(epoch) }, 4),
  destinationBlocks: Uint32Array.of(0, 1, 2, 3),
});
while (reader.endpoint.ledger.counts().posted === 0) await new Promise((resolve) => setTimeout(resolve, 10));
process.stdout.write(`${JSON.stringify({ event: 'pinned', agent: reader.agent.name })}\n`);
setInterval(() => {}, 1 << 30);
