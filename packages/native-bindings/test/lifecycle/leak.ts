// Drops an allocation without freeing it (or, with `operation` as the second argument, a completed
// operation without releasing it; with `mixed`, one of several) and forces garbage collection (run with --expose-gc): the facade must
// warn about the leaked handle, and must NOT free the native state on its own. An operation's warning
// is armed at its agent's completion poll after the one that delivered its outcome: a second operation's
// completion makes that poll.
// V8 runs FinalizationRegistry callbacks in a task it posts after the collection that found the object
// dead: each round is one forced full collection and one turn of the event loop for that task — no
// timer, so the machine's load changes nothing. A few rounds suffice; ten fail loudly instead of waiting.
import type { Agent, Backend } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';
import { piecewiseDescriptors } from '../support/content.js';
import { openPair, readRequest } from '../support/pair.js';

const ROUNDS = 10;
let round = 0;

let agent: Agent | undefined;
let kept: unknown; // what must not be collected: only the dropped handle may warn
process.on('warning', (warning) => {
  if ((warning as Error & { code?: string }).code !== 'KVREUSE_LEAKED_HANDLE') return;
  const counters = agent?.counters();
  emit({ event: 'warned', message: warning.message, ...counters, round });
  process.exit(0);
});

const backend = (process.argv[2] ?? 'loopback') as Backend;
if (process.argv[3] === 'operation') {
  const pair = await openPair(backend, 4096, 3);
  kept = pair;
  agent = pair.reader;
  await (async () => {
    await pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096))).done; // dropped unreleased
  })();
  const next = pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096)));
  await next.done;
  next.release();
} else if (process.argv[3] === 'mixed') {
  // Two outcomes delivered by one completion poll, one released before the next poll, and an earlier outcome
  // released only then: neither release may spare the dropped one its warning.
  const pair = await openPair(backend, 4096, 3);
  kept = pair;
  agent = pair.reader;
  const read = () => pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096)));
  const early = read();
  await early.done;
  pair.reader.faults.delayCompletions('forever');
  const released = read();
  await (async () => {
    const dropped = read();
    pair.reader.faults.clear();
    await dropped.done;
    if (!released.isSettled) throw new Error('the two outcomes were delivered by separate completion polls');
  })();
  early.release();
  released.release();
  const next = read();
  await next.done;
  next.release();
} else {
  agent = await transport.createAgent({ name: agentName('leak'), backend });
  await (async () => {
    await agent?.allocate(4096);
  })();
}
const collect = globalThis.gc;
if (collect === undefined) throw new Error('leak.ts needs node --expose-gc');
for (round = 1; round <= ROUNDS; round++) {
  collect();
  await new Promise((resolve) => setImmediate(resolve));
}
throw new Error(`no KVREUSE_LEAKED_HANDLE warning after ${ROUNDS} forced collections`);
