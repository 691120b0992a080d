// Run inside a mount and IPC namespace where /dev/shm is a 24 MiB tmpfs and SysV shared memory takes at most
// 8 MiB (see small-shm.test.ts): allocates more than either can hold, then an allocation /dev/shm can hold,
// and reports what happened.
import { codeOf } from '@kvreuse/errors';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';

const agent = await transport.createAgent({ name: agentName('small-shm'), backend: 'ucx' });
let refusal: Record<string, unknown> = {};
try {
  (await agent.allocate(64 << 20)).free();
} catch (error) {
  refusal = { name: (error as Error).constructor.name, code: codeOf(error), message: (error as Error).message };
}
const { liveAllocations, allocatedBytes } = agent.counters();
const fits = await agent.allocate(12 << 20);
fits.view().fill(0x5a);
await fits.free();
await agent.close();
emit({ event: 'report', refusal, afterRefusal: { liveAllocations, allocatedBytes }, fitsAllocated: true });
