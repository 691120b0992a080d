// The destination of the ucx process tests: pulls the 308 MB prefix through the ledger; the parent
// kills (or stops) the source mid-pull. Reports how the operation ended, what happened to its bank
// meanwhile, the shutdown result, and — for a quarantined operation — whether the native layer ended
// it within an observation window, then exits.
import { Bank, kvreuseOwner, registerRank } from '@kvreuse/registry';
import { DrainController, type LedgerOperation, OperationLedger, PeerBook } from '../../src/index.js';
import { hear, tell } from '../support/child.js';
import { transport } from '../support/loopback-world.js';

const PIECE_BYTES = 131_072;
const PIECES = 2_352;
const BYTES = PIECE_BYTES * PIECES;
export const TIMEOUTS = { operationTimeoutMs: 1_000, abandonTimeoutMs: 3_000, shutdownDeadlineMs: 6_000 };
const [name = 'sigkill-destination', sourceName = 'sigkill-source', watchLate = 'window'] = process.argv.slice(2);
/**
 * How long a quarantined operation is watched after shutdown for the native layer to end it: briefly
 * when that may never happen (a killed source); for a source the parent resumes (`until-released`),
 * long enough for the native layer to finish, yet bounded so that the test reports what it saw
 * instead of timing out.
 */
const OBSERVATION_MS = watchLate === 'until-released' ? 45_000 : 5_000;

const published = await hear();
const agent = transport.createAgent({ name, backend: 'ucx' });
const memory = agent.allocate(BYTES);
const bank = Bank.adopt(
  { tpRank: 0, ppRank: 0, index: 0, memKind: 'dram', deviceId: 0, address: memory.address, bytes: BigInt(BYTES), blocks: 42, blockStride: BigInt(BYTES / 42) },
  kvreuseOwner(memory),
);
const rank = await registerRank({ agent, banks: [bank] });
const peers = new PeerBook();
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
const ticket = peers.track(sourceName, 'source-incarnation', peer);
const ledger = new OperationLedger({ agent, peers, timeouts: TIMEOUTS });
const controller = new DrainController({ ledger, shutdownDeadlineMs: TIMEOUTS.shutdownDeadlineMs, agent });
controller.addRank(rank);

const offsets = BigUint64Array.from({ length: PIECES }, (_, i) => BigInt(i * PIECE_BYTES));
const operation: LedgerOperation = ledger.post(
  {
    direction: 'read',
    peer,
    descriptors: {
      sourceBank: new Uint32Array(PIECES),
      sourceOffset: offsets,
      destinationBank: new Uint32Array(PIECES),
      destinationOffset: offsets,
      length: new BigUint64Array(PIECES).fill(BigInt(PIECE_BYTES)),
    },
    localRegions: [bank.region!],
    remoteRegions: [Number(published['region'])],
  },
  { ticket, banks: [bank] },
);
const quarantined = new Promise<void>((resolve) => ledger.on('quarantined', () => resolve()));

// Tell the parent once bytes are arriving (and the operation is still in flight).
const arriving = setInterval(() => {
  const moved = memory.view().readUInt8(0) === 0x3c;
  if (moved || operation.phase !== 'in-flight') {
    clearInterval(arriving);
    tell({ event: 'pulling', phase: operation.phase });
  }
}, 1);

await hear(); // the source was cut off
const outcome = await operation.outcome;
// The operation ends — natively, or by quarantine at the abandon deadline.
await Promise.race([operation.quiescence, quarantined]);
const afterEnd = { phase: operation.phase, bankState: bank.state, references: bank.references, health: peers.health(sourceName) };

const released = new Promise<void>((resolve) => controller.on('released', () => resolve()));
const result = await controller.shutdown();
tell({ event: 'shut-down', quarantined: result.quarantined.length, bankState: bank.state });
let late: Record<string, unknown> | undefined;
if (result.quarantined.length > 0) {
  // Retained until the native layer says terminal — which it may never do before the process exits.
  const shutdownBankState = bank.state;
  const window = new Promise<'still-quarantined'>((resolve) => setTimeout(() => resolve('still-quarantined'), OBSERVATION_MS));
  const ended = await Promise.race([released.then(() => 'released' as const), window]);
  const quiescence = ended === 'released' ? await operation.quiescence : undefined;
  late = { shutdownBankState, ended, quiescence, bankState: bank.state, references: bank.references, agentOpen: agent.isOpen, watchedMs: OBSERVATION_MS };
}
tell({
  event: 'done',
  outcome: outcome.ok ? { ok: true } : { ok: false, code: outcome.error.code, message: outcome.error.message },
  afterEnd,
  shutdown: { retained: result.retained, steps: result.steps, report: result.report, banksRetained: result.banksRetained },
  late,
  finalBankState: bank.state,
  counters: transport.counters(),
  ledger: ledger.counts(),
});
process.exit(0);
