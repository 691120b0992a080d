// Example 1: a decode worker and a prefill worker in one process, on the loopback transport (agents of
// one process, memcpy) with the in-memory discovery store. The decode worker retains the KV blocks of
// a conversation's first turn; the prefill worker, given the second turn, pulls that prefix instead of
// recomputing it, verifies it, and both shut down cleanly.
//
//   node examples/loopback-memory.mjs
import { MemoryDiscoveryStore, openClusterSecret } from '@kvreuse/discovery';
import {
  blockHashes,
  conversation,
  describePull,
  openWorker,
  pull,
  pullHint,
  retain,
  settings,
  stop,
  whenReady,
} from './kv-worker.mjs';

// Discovery: where workers publish their rank parts and learn each other's readiness.
const discovery = new MemoryDiscoveryStore();
// The memory store serves one process, so its cluster secret is a random one of this process.
const secret = openClusterSecret({ ...settings.discovery, backend: 'memory' });
const decode = await openWorker({
  workerId: 'decode-0',
  role: 'decode',
  backend: 'loopback',
  discovery,
  secret,
  serve: true,
});
const prefill = await openWorker({ workerId: 'prefill-0', role: 'prefill', backend: 'loopback', discovery, secret });

// Turn 1 was decoded: the decode worker holds its 6 blocks (its framework would have computed them).
const turn1 = conversation(6);
retain(decode, blockHashes(turn1));
const source = await whenReady(decode);
await whenReady(prefill);
console.log(`decode-0 and prefill-0 ready (epochs ${source.epoch} and ${prefill.endpoint.epoch})`);

// Turn 2 repeats turn 1 and adds a block. Hashed the same way, its first 6 blocks name what decode-0 holds.
const turn2 = [...turn1, ...conversation(7).slice(turn1.length)];
const prefix = blockHashes(turn2).subarray(0, 6);
const pulled = await pull(prefill, pullHint(source, prefix, 'same-host'));
console.log(`prefill-0 ${describePull(pulled)}`);

// The reader stops first, then the source; each drain hands every bank back to its owner.
console.log(await stop(prefill));
console.log(await stop(decode));
await discovery.close();
process.exitCode = pulled.receipt.blocks === prefix.length && pulled.matching === prefix.length ? 0 : 1;
