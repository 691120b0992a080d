// The process of the SIGTERM-under-load test: a reader with 8 banks keeps 1,000 loopback operations
// in flight (completions held natively) and, once intake stops, keeps trying to post more; shutdown
// is wired to SIGTERM explicitly, and its withdrawal of rank parts records what it found. Prints the shutdown result and exits with shutdownOnSignals' exit code.
import { resolveSettings } from '@kvreuse/config';
import { DrainingError, type LedgerOperation, shutdownOnSignals } from '../../src/index.js';
import { tell } from '../support/child.js';
import { openLoopbackWorld } from '../support/loopback-world.js';

const IN_FLIGHT = 1_000;
const { settings } = resolveSettings({ env: process.env });
/** What the worker looked like when shutdown withdrew its rank parts (the first step). */
let atWithdrawal: { intakeStopped: boolean; liveRegistrations: number; live: number } | undefined;
const world = await openLoopbackWorld({
  ranks: 2,
  banksPerRank: 4,
  timeouts: settings.transport,
  shutdownDeadlineMs: settings.transport.shutdownDeadlineMs,
  hooks: {
    withdrawRankParts: async () => {
      atWithdrawal = { intakeStopped: world.ledger.intakeStopped, liveRegistrations: world.reader.counters().liveRegistrations, live: world.ledger.counts().live };
    },
  },
});
world.reader.faults.delayCompletions('forever');

const operations: LedgerOperation[] = [];
for (let i = 0; i < IN_FLIGHT; i++) {
  const bank = world.banks[i % world.banks.length]!;
  operations.push(world.ledger.post(world.request([bank]), { ticket: world.ticket(), banks: [bank] }));
}
let refused = 0;
let otherErrors = 0;
// Load keeps coming once intake stops: a post every millisecond, each refused with DRAINING. Before
// that nothing more is posted, so exactly 1,000 operations are in flight when SIGTERM arrives.
setInterval(() => {
  const bank = world.banks[0]!;
  try {
    if (world.ledger.intakeStopped) {
      world.ledger.post(world.request([bank]), { ticket: world.ticket(), banks: [bank] });
    }
  } catch (error) {
    if (error instanceof DrainingError) refused += 1;
    else otherErrors += 1;
  }
}, 1).unref();

shutdownOnSignals(world.controller, {
  onResult: (result) => {
    const outcomes = { ok: 0, failed: 0 };
    for (const operation of operations) outcomes[operation.phase === 'quiescent' ? 'ok' : 'failed'] += 1;
    tell({
      event: 'shut-down',
      result,
      atWithdrawal,
      refused,
      otherErrors,
      quiescent: outcomes.ok,
      bankStates: world.banks.map((bank) => bank.state),
      readerOpen: world.reader.isOpen,
    });
  },
});
tell({ event: 'loaded', inFlight: world.ledger.counts().live, nativeInFlight: world.reader.counters().inflightOperations });
