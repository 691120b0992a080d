// The process of the SIGTERM-under-load test: a reader with 8 banks keeps 1,000 loopback operations
// in flight (completions held natively); shutdown is wired to SIGTERM explicitly. Its deadlines run
// on a manual clock that only the parent moves, so every ordering is forced:
// - the rank-part withdrawal (the first step) records what it found and tells the parent `withdrawn`;
//   by then the rest of the drain is scheduled, up to waiting for the operations;
// - the parent then sends `{ advance: ms }` (the clock moves: the operation timeouts fire, and the
//   held operations are cancelled) or `{ release: true }` (the held completions are let go);
// - every operation that ends is followed by a new post, as a request loop would post its next one,
//   and each of those is refused with DRAINING (intake stopped before any operation could end).
// With `--refusing-owner`, a ninth bank (rank tp 2) belongs to a framework that refuses it back.
// Prints the shutdown result and exits with shutdownOnSignals' exit code.
import { createInterface } from 'node:readline';
import { defineSettings } from '@kvreuse/config';
import { transportGroup } from '@kvreuse/native-bindings';
import { Bank, frameworkOwner, registerRank } from '@kvreuse/registry';
import {
  DrainingError,
  type LedgerOperation,
  type OperationOutcome,
  OperationTimedOutError,
  shutdownOnSignals,
} from '../../src/index.js';
import { tell } from '../support/child.js';
import { openLoopbackWorld } from '../support/loopback-world.js';
import { ManualClock } from '../support/manual-clock.js';

const IN_FLIGHT = 1_000;
// The transport settings this worker reads; the variables of other groups are not its own.
const { settings } = defineSettings([transportGroup], { foreignGroups: 'ignore' }).resolve({ env: process.env });
const clock = new ManualClock();
const world = await openLoopbackWorld({
  ranks: 2,
  banksPerRank: 4,
  clock,
  timeouts: settings.transport,
  shutdownDeadlineMs: settings.transport.shutdownDeadlineMs,
  hooks: {
    withdrawRankParts: async () => {
      tell({
        event: 'withdrawn',
        intakeStopped: world.ledger.intakeStopped,
        liveRegistrations: world.reader.counters().liveRegistrations,
        live: world.ledger.counts().live,
      });
    },
  },
});
if (process.argv.includes('--refusing-owner')) {
  const memory = await world.reader.allocate(1 << 16);
  const bank = Bank.adopt(
    {
      tpRank: 2,
      ppRank: 0,
      index: 0,
      memKind: 'dram',
      deviceId: 0,
      address: memory.address,
      bytes: 1n << 16n,
      blocks: 1,
      blockStride: 1n << 16n,
    },
    frameworkOwner('engine-block-pool', () => Promise.reject(new Error('framework busy'))),
  );
  world.controller.addRank(await registerRank({ agent: world.reader, banks: [bank] }));
}
world.reader.faults.delayCompletions('forever');

let refused = 0;
let otherErrors = 0;
/** How the 1,000 operations' requests ended: `ok`, or the error code and the deadline that ended them. */
const ended: Record<string, number> = {};
function onOutcome(outcome: OperationOutcome): void {
  const how = outcome.ok
    ? 'ok'
    : outcome.error instanceof OperationTimedOutError
      ? `${outcome.error.code} ${outcome.error.setting}`
      : outcome.error.code;
  ended[how] = (ended[how] ?? 0) + 1;
  postNext();
}
function postNext(): void {
  const bank = world.banks[0]!;
  try {
    world.ledger.post(world.request([bank]), { ticket: world.ticket(), banks: [bank] });
  } catch (error) {
    if (error instanceof DrainingError) refused += 1;
    else otherErrors += 1;
  }
}

const operations: LedgerOperation[] = [];
for (let i = 0; i < IN_FLIGHT; i++) {
  const bank = world.banks[i % world.banks.length]!;
  const operation = world.ledger.post(world.request([bank]), { ticket: world.ticket(), banks: [bank] });
  void operation.outcome.then(onOutcome);
  operations.push(operation);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const order = JSON.parse(line) as { advance?: number; release?: boolean };
  if (order.advance !== undefined) clock.advance(order.advance);
  if (order.release === true) world.reader.faults.clear();
});

shutdownOnSignals(world.controller, {
  onResult: (result) => {
    tell({
      event: 'shut-down',
      result,
      refused,
      otherErrors,
      ended,
      quiescent: operations.filter((operation) => operation.phase === 'quiescent').length,
      bankStates: world.banks.map((bank) => bank.state),
      readerOpen: world.reader.isOpen,
    });
  },
});
tell({
  event: 'loaded',
  inFlight: world.ledger.counts().live,
  nativeInFlight: world.reader.counters().inflightOperations,
  operationTimeoutMs: settings.transport.operationTimeoutMs,
});
