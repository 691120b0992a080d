// The writer in network namespace B: loads the owner's metadata (from the parent), then WRITEs one
// mebibyte of its own bank to each mebibyte of the owner's, one after the other, each filled with the
// pattern of its seed. Each WRITE is given WRITE_BOUND_MS to complete: the first that does not is canceled,
// the WRITEs stop there, and `wrote` names it as `stalled` (a hang becomes a failure), with the peer's transport.
import type { Agent, Operation } from '@kvreuse/native-bindings';
import { transport } from '../support/backends.js';
import { emit, exitWithParent, nextMessageFromParent } from '../support/child.js';
import { fillPattern } from '../support/content.js';
import { MEBIBYTE, seedOfWrite } from './writes.js';

exitWithParent();

/** Far above a mebibyte's copy (well under a millisecond); only a stalled WRITE reaches it. */
const WRITE_BOUND_MS = 10_000;

/** Whether `operation` completed within the bound; canceled (and settled) when it did not. */
async function completesInBound(operation: Operation): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), WRITE_BOUND_MS);
  });
  const completed = await Promise.race([operation.done.then(() => true), bound]);
  clearTimeout(timer);
  if (!completed) {
    operation.cancel();
    await operation.done.catch(() => undefined);
  }
  return completed;
}

const count = Number(process.argv[2]);
const published = await nextMessageFromParent();
const agent: Agent = await transport.createAgent({ name: `netns-shm-writer-${process.pid}`, backend: 'ucx' });
const bank = await agent.allocate(MEBIBYTE);
const region = agent.register(bank);
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
const path = peer.transport();

let stalled: number | undefined;
for (let write = 0; write < count && stalled === undefined; write++) {
  fillPattern(bank.view(), seedOfWrite(write));
  const operation = agent.post({
    direction: 'write',
    peer,
    localRegions: [region],
    remoteRegions: [Number(published['region'])],
    descriptors: {
      sourceBank: Uint32Array.of(0),
      sourceOffset: BigUint64Array.of(0n),
      destinationBank: Uint32Array.of(0),
      destinationOffset: BigUint64Array.of(BigInt(write * MEBIBYTE)),
      length: BigUint64Array.of(BigInt(MEBIBYTE)),
    },
  });
  if (!(await completesInBound(operation))) stalled = write;
  operation.release();
}
emit({ event: 'wrote', stalled: stalled ?? null, transport: path });

await region.deregister();
await bank.free();
await agent.close();
process.exit(0);
