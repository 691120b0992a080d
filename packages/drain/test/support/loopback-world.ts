import {
  type Agent,
  type Backend,
  loadTransport,
  type Peer,
  type PostRequest,
  type Region,
} from '@kvreuse/native-bindings';
import { Bank, kvreuseOwner, type RegisteredRank, registerRank } from '@kvreuse/registry';
import {
  type Clock,
  DrainController,
  type DrainControllerOptions,
  OperationLedger,
  PeerBook,
  type PeerTicket,
} from '../../src/index.js';

/** KVREUSE_TRANSPORT_LIBRARY points the tests (and their child processes) at another build of the library. */
const libraryPath = process.env['KVREUSE_TRANSPORT_LIBRARY'];
export const transport = loadTransport(libraryPath === undefined ? {} : { libraryPath });
const inCi = process.env['CI'] !== undefined && !['', '0', 'false'].includes(process.env['CI']);
const ucxBuilt = transport.capabilities().backends.includes('ucx');
/** Whether the UCX tests run: UCX is built, or CI (`.ci/run` sets CI=1) requires them and they fail without it. */
export const ucxTestsRun = ucxBuilt || inCi;
if (!ucxBuilt) {
  if (inCi) console.error('drain: the ucx backend is not built; CI requires it, so the ucx process tests will FAIL');
  else console.warn('drain: the ucx backend is not built; the ucx process tests are SKIPPED here');
}

export const PIECE_BYTES = 4096;
export const SOURCE_BYTES = 1 << 20;

let sequence = 0;
export function agentName(label: string): string {
  sequence += 1;
  return `${label}-${process.pid}-${sequence}`;
}

/**
 * Two loopback agents of this process: a source holding one registered bank, and a reader whose
 * banks are registry banks (kvreuse-owned allocations) registered as ranks, with a ledger and a drain
 * controller over the reader.
 */
export interface LoopbackWorld {
  readonly source: Agent;
  readonly sourceRegion: Region;
  readonly reader: Agent;
  readonly peer: Peer;
  readonly ticket: () => PeerTicket;
  readonly book: PeerBook;
  readonly ledger: OperationLedger<PostRequest>;
  readonly controller: DrainController<PostRequest>;
  readonly ranks: RegisteredRank[];
  readonly banks: Bank[];
  /** Reads `PIECE_BYTES` from the source into each bank (one descriptor per bank), as one operation. */
  request(banks: readonly Bank[]): PostRequest;
  /** Closes the source agent (the reader is closed by shutdown). */
  closeSource(): Promise<void>;
}

/** The tensor-parallel rank's banks: `count` kvreuse-owned allocations of the reader, one block each. */
async function allocateRankBanks(reader: Agent, tpRank: number, count: number, bankBytes: number): Promise<Bank[]> {
  const banks: Bank[] = [];
  for (let index = 0; index < count; index++) {
    const allocation = await reader.allocate(bankBytes);
    banks.push(
      Bank.adopt(
        {
          tpRank,
          ppRank: 0,
          index,
          memKind: 'dram',
          deviceId: 0,
          address: allocation.address,
          bytes: BigInt(bankBytes),
          blocks: 1,
          blockStride: BigInt(bankBytes),
        },
        kvreuseOwner(allocation),
      ),
    );
  }
  return banks;
}

export async function openLoopbackWorld(options: {
  ranks: number;
  banksPerRank: number;
  bankBytes?: number;
  clock?: Clock;
  timeouts?: { operationTimeoutMs: number; abandonTimeoutMs: number };
  shutdownDeadlineMs?: number;
  backend?: Backend;
  /** The controller's source-side hooks (withdrawals, readers' wait). */
  hooks?: Pick<DrainControllerOptions<PostRequest>, 'withdrawRankParts' | 'withdrawInventory' | 'waitForReaders'>;
}): Promise<LoopbackWorld> {
  const backend = options.backend ?? 'loopback';
  const bankBytes = options.bankBytes ?? 1 << 16;
  const source = await transport.createAgent({ name: agentName('source'), backend });
  const sourceMemory = await source.allocate(SOURCE_BYTES);
  sourceMemory.view().fill(0xab);
  const sourceRegion = source.register(sourceMemory);
  const reader = await transport.createAgent({ name: agentName('reader'), backend });
  const peer = reader.loadPeer(source.metadata());
  const book = new PeerBook(options.clock === undefined ? undefined : () => options.clock!.now());
  book.track(source.name, 'incarnation-1', peer);
  const ledger = new OperationLedger<PostRequest>({
    agent: reader,
    peers: book,
    timeouts: options.timeouts ?? { operationTimeoutMs: 1000, abandonTimeoutMs: 5000 },
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  });
  const controller = new DrainController({
    ledger,
    shutdownDeadlineMs: options.shutdownDeadlineMs ?? 10_000,
    agent: reader,
    ...options.hooks,
  });
  const ranks: RegisteredRank[] = [];
  for (let tpRank = 0; tpRank < options.ranks; tpRank++) {
    const banks = await allocateRankBanks(reader, tpRank, options.banksPerRank, bankBytes);
    const rank = await registerRank({ agent: reader, banks });
    ranks.push(rank);
    controller.addRank(rank);
  }
  return {
    source,
    sourceRegion,
    reader,
    peer,
    ticket: () => book.ticket(source.name),
    book,
    ledger,
    controller,
    ranks,
    banks: ranks.flatMap((rank) => rank.banks),
    request(banks) {
      const count = banks.length;
      return {
        direction: 'read',
        peer,
        descriptors: {
          sourceBank: new Uint32Array(count),
          sourceOffset: BigUint64Array.from(banks.map((_, i) => BigInt((i * PIECE_BYTES) % SOURCE_BYTES))),
          destinationBank: Uint32Array.from(banks.map((_, i) => i)),
          destinationOffset: new BigUint64Array(count),
          length: new BigUint64Array(count).fill(BigInt(PIECE_BYTES)),
        },
        localRegions: banks.map((bank) => bank.region!),
        remoteRegions: [sourceRegion.id],
      };
    },
    async closeSource() {
      await sourceRegion.deregister();
      await sourceMemory.free();
      await source.close();
    },
  };
}

const LIVE_COUNTERS = [
  'liveAgents',
  'liveRegistrations',
  'liveAllocations',
  'livePeers',
  'liveOperations',
  'inflightOperations',
] as const;

/** The process-wide counters that must be back to zero once everything is closed. */
export function liveCounters(): Record<(typeof LIVE_COUNTERS)[number], number> {
  const counters = transport.counters();
  return Object.fromEntries(LIVE_COUNTERS.map((name) => [name, counters[name]])) as Record<
    (typeof LIVE_COUNTERS)[number],
    number
  >;
}

/** Resolves after the next macrotask: wake-up sockets get a chance to deliver completions. */
export const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
