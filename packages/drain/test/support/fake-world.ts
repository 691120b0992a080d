import { Bank, frameworkOwner, type RegisteredRank, registerRank, type RegistrationAgent } from '@kvreuse/registry';
import { DrainController, OperationLedger, PeerBook } from '../../src/index.js';
import { type FakeNative, type FakePeer, type FakeRegion, type FakeRequest } from './fake-native.js';
import { FakeNative as Native } from './fake-native.js';
import { ManualClock } from './manual-clock.js';

export const TIMEOUTS = { operationTimeoutMs: 100, abandonTimeoutMs: 250 };
export const SHUTDOWN_DEADLINE_MS = 400;
export const PEER = 'decode-0';
const BANK_BYTES = 1n << 20n;

/** A ledger and drain controller over the fake native layer, with real registry banks. */
export interface FakeWorld {
  readonly native: FakeNative;
  readonly clock: ManualClock;
  readonly book: PeerBook;
  readonly ledger: OperationLedger<FakeRequest>;
  readonly controller: DrainController<FakeRequest>;
  readonly ranks: RegisteredRank[];
  readonly banks: Bank[];
  readonly peer: FakePeer;
  /** How many times each bank was handed back to its owner. */
  readonly handedBack: Map<Bank, number>;
}

export async function openFakeWorld(ranks: number, banksPerRank: number): Promise<FakeWorld> {
  const native = new Native();
  const clock = new ManualClock();
  const book = new PeerBook(() => clock.now());
  const peer = native.peer(1);
  book.track(PEER, 'incarnation-1', peer);
  const ledger = new OperationLedger<FakeRequest>({ agent: native.agent, peers: book, timeouts: TIMEOUTS, clock });
  const controller = new DrainController({ ledger, shutdownDeadlineMs: SHUTDOWN_DEADLINE_MS, agent: native.agent });
  const handedBack = new Map<Bank, number>();
  const registered: RegisteredRank[] = [];
  let address = 0x10_0000n;
  for (let tpRank = 0; tpRank < ranks; tpRank++) {
    const banks: Bank[] = [];
    for (let index = 0; index < banksPerRank; index++) {
      const spec = {
        tpRank,
        ppRank: 0,
        index,
        memKind: 'dram' as const,
        deviceId: 0,
        address,
        bytes: BANK_BYTES,
        blocks: 16,
        blockStride: BANK_BYTES / 16n,
      };
      address += BANK_BYTES;
      const bank: Bank = Bank.adopt(
        spec,
        frameworkOwner(`bank-${tpRank}-${index}`, () => {
          const region = native.regions.find((r) => r.address === spec.address);
          if (region === undefined || !region.deregistered)
            native.violations.push(`bank ${tpRank}/${index} handed back while registered`);
          if (native.operations.some((op) => op.state === 'in-progress' && op.regions.includes(region as FakeRegion))) {
            native.violations.push(`bank ${tpRank}/${index} handed back while an operation is in progress on it`);
          }
          handedBack.set(bank, (handedBack.get(bank) ?? 0) + 1);
        }),
      );
      banks.push(bank);
    }
    const rank = await registerRank({ agent: native.agent as unknown as RegistrationAgent, banks });
    registered.push(rank);
    controller.addRank(rank);
  }
  return {
    native,
    clock,
    book,
    ledger,
    controller,
    ranks: registered,
    banks: registered.flatMap((r) => r.banks),
    peer,
    handedBack,
  };
}

/** The post request for banks of the fake world. */
export function fakeRequest(world: FakeWorld, banks: readonly Bank[]): FakeRequest {
  return {
    peer: world.peer,
    localRegions: banks.map((bank) => bank.region as unknown as FakeRegion),
    remoteRegions: [7],
  };
}

/**
 * Lets pending promise callbacks run. Everything in the fake world settles through promise chains
 * (no timers, no I/O), so a bounded number of microtask turns is enough — and far cheaper than a
 * macrotask per step over 10,000 runs. A chain longer than this shows up as a failed check.
 */
export async function flush(): Promise<void> {
  for (let turn = 0; turn < 32; turn++) await undefined;
}
