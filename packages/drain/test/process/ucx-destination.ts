// The destination of the ucx process tests: pulls the 308 MB prefix through the ledger from a source
// the parent has stopped, so that the pull cannot finish (over tcp a get needs the source's
// progress); the parent then kills the source or keeps it stopped. Reports how the operation ended, what happened to its bank
// meanwhile and the shutdown result, then exits. The parent picks the deadlines, which force the
// ordering under test: `native-first` (the operation timeout is far beyond anything the native layer
// takes, so the native layer ends the operation) or `timeout-first` (the timeout cancels the
// operation, and the abandon deadline is far beyond the native layer's bounded cancellation).
import { Bank, kvreuseOwner, registerRank } from '@kvreuse/registry';
import { DrainController, type LedgerOperation, OperationLedger, PeerBook } from '../../src/index.js';
import { hear, tell } from '../support/child.js';
import { transport } from '../support/loopback-world.js';

const PIECE_BYTES = 131_072;
const PIECES = 2_352;
const BYTES = PIECE_BYTES * PIECES;
const ORDERINGS = {
  'native-first': { operationTimeoutMs: 60_000, abandonTimeoutMs: 61_000 },
  'timeout-first': { operationTimeoutMs: 1_000, abandonTimeoutMs: 30_000 },
} as const;
const [name = 'sigkill-destination', sourceName = 'sigkill-source', ordering = 'native-first'] = process.argv.slice(2);
const TIMEOUTS = ORDERINGS[ordering as keyof typeof ORDERINGS];
if (!TIMEOUTS) throw new Error(`ucx-destination: unknown ordering '${ordering}' (native-first | timeout-first)`);
const SHUTDOWN_DEADLINE_MS = 6_000;

const published = await hear();
const agent = await transport.createAgent({ name, backend: 'ucx' });
const memory = await agent.allocate(BYTES);
const bank = Bank.adopt(
  {
    tpRank: 0,
    ppRank: 0,
    index: 0,
    memKind: 'dram',
    deviceId: 0,
    address: memory.address,
    bytes: BigInt(BYTES),
    blocks: 42,
    blockStride: BigInt(BYTES / 42),
  },
  kvreuseOwner(memory),
);
const rank = await registerRank({ agent, banks: [bank] });
const peers = new PeerBook();
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
const ticket = peers.track(sourceName, 'source-incarnation', peer);
const ledger = new OperationLedger({ agent, peers, timeouts: TIMEOUTS });
const controller = new DrainController({ ledger, shutdownDeadlineMs: SHUTDOWN_DEADLINE_MS, agent });
controller.addRank(rank);

/** Reads the first `pieces` pieces of the source's region into the bank. */
function pull(pieces: number): LedgerOperation {
  const offsets = BigUint64Array.from({ length: pieces }, (_, i) => BigInt(i * PIECE_BYTES));
  return ledger.post(
    {
      direction: 'read',
      peer,
      descriptors: {
        sourceBank: new Uint32Array(pieces),
        sourceOffset: offsets,
        destinationBank: new Uint32Array(pieces),
        destinationOffset: offsets,
        length: new BigUint64Array(pieces).fill(BigInt(PIECE_BYTES)),
      },
      localRegions: [bank.region!],
      remoteRegions: [Number(published['region'])],
    },
    { ticket, banks: [bank] },
  );
}

// One piece first, so that the endpoint is wired up and reads work before the source is stopped.
const warmUp = pull(1);
const warmed = await warmUp.outcome;
if (!warmed.ok) throw warmed.error;
await warmUp.quiescence;
if (memory.view().readUInt8(0) !== 0x3c)
  throw new Error('ucx-destination: the warm-up read did not bring the source pattern');
tell({ event: 'connected' });

await hear(); // the source is stopped
const operation = pull(PIECES);
// Tell the parent once UCX requests of the pull are really in flight (the stopped source answers none).
const issued = setInterval(() => {
  if (transport.counters().inflightRequests > 0 || operation.phase !== 'in-flight') {
    clearInterval(issued);
    tell({ event: 'pulling', phase: operation.phase, inflightRequests: transport.counters().inflightRequests > 0 });
  }
}, 1);

await hear(); // the source was cut off
const outcome = await operation.outcome;
const quiescence = await operation.quiescence;
const afterEnd = {
  phase: operation.phase,
  bankState: bank.state,
  references: bank.references,
  health: peers.health(sourceName),
};
tell({ event: 'quiescent' });
// Shutdown closes the endpoint to the source by the shutdown's deadline, also when the source is stopped.
await hear();
const result = await controller.shutdown();
tell({
  event: 'done',
  outcome: outcome.ok ? { ok: true } : { ok: false, code: outcome.error.code, message: outcome.error.message },
  quiescence,
  afterEnd,
  shutdown: { retained: result.retained, quarantined: result.quarantined.length, banksRetained: result.banksRetained },
  finalBankState: bank.state,
  counters: transport.counters(),
  ledger: ledger.counts(),
});
process.exit(0);
