// Drops an allocation without freeing it and forces garbage collection (run with --expose-gc): the
// facade must warn about the leaked handle, and must NOT free the native memory on its own.
// V8 runs FinalizationRegistry callbacks in a task it posts after the collection that found the object
// dead: each round is one forced full collection and one turn of the event loop for that task — no
// timer, so the machine's load changes nothing. A few rounds suffice; ten fail loudly instead of waiting.
import type { Backend } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';

const ROUNDS = 10;
let round = 0;

process.on('warning', (warning) => {
  if ((warning as Error & { code?: string }).code !== 'KVREUSE_LEAKED_HANDLE') return;
  emit({ event: 'warned', message: warning.message, liveAllocations: agent.counters().liveAllocations, round });
  process.exit(0);
});

const agent = await transport.createAgent({
  name: agentName('leak'),
  backend: (process.argv[2] ?? 'loopback') as Backend,
});
await (async () => {
  await agent.allocate(4096);
})();
const collect = globalThis.gc;
if (collect === undefined) throw new Error('leak.ts needs node --expose-gc');
for (round = 1; round <= ROUNDS; round++) {
  collect();
  await new Promise((resolve) => setImmediate(resolve));
}
throw new Error(`no KVREUSE_LEAKED_HANDLE warning after ${ROUNDS} forced collections`);
