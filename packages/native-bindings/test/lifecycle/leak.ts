// Drops an allocation without freeing it and forces garbage collection (run with --expose-gc): the
// facade must warn about the leaked handle, and must NOT free the native memory on its own.
import type { Backend } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';

process.on('warning', (warning) => {
  if ((warning as Error & { code?: string }).code !== 'KVREUSE_LEAKED_HANDLE') return;
  emit({ event: 'warned', message: warning.message, liveAllocations: agent.counters().liveAllocations });
  process.exit(0);
});

const agent = transport.createAgent({ name: agentName('leak'), backend: (process.argv[2] ?? 'loopback') as Backend });
(() => {
  agent.allocate(4096);
})();
const collect = globalThis.gc;
if (collect === undefined) throw new Error('leak.ts needs node --expose-gc');
for (let round = 0; round < 50; round++) {
  collect();
  await new Promise((resolve) => setTimeout(resolve, 20));
}
emit({ event: 'not-warned' });
process.exit(1);
