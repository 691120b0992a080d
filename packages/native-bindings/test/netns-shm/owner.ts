// The owner in network namespace A: a bank of `count` mebibytes, zeroed, registered and published; on
// `verify` it reports every mebibyte that does not hold the pattern of its seed, then closes on `close`.
import { transport } from '../support/backends.js';
import { emit, exitWithParent, nextMessageFromParent, untilParentSays } from '../support/child.js';
import { findPatternMismatch } from '../support/content.js';
import { MEBIBYTE, seedOfWrite } from './writes.js';

exitWithParent();

const count = Number(process.argv[2]);
const agent = await transport.createAgent({ name: `netns-shm-owner-${process.pid}`, backend: 'ucx' });
const bank = await agent.allocate(count * MEBIBYTE);
bank.view().fill(0);
const region = agent.register(bank);
emit({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id });

await nextMessageFromParent(); // verify
const wrong: { write: number; at: number }[] = [];
for (let write = 0; write < count; write++) {
  const at = findPatternMismatch(bank.view().subarray(write * MEBIBYTE, (write + 1) * MEBIBYTE), seedOfWrite(write));
  if (at !== -1) wrong.push({ write, at });
}
emit({ event: 'verified', wrong });

await untilParentSays('close');
await region.deregister();
await bank.free();
await agent.close();
process.exit(0);
