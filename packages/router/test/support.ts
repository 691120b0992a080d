// Test set-up of the router: real worker descriptors (parsed and assembled as readiness does), settings
// resolved from flags, the real retained inventory on a manual wall clock, and a manual monotonic clock.
import { defineSettings, type SettingsOf } from '@kvreuse/config';
import {
  blockHashScheme,
  hashBlockChain,
  inventoryGroup,
  RetainedInventory,
  type RetentionTier,
} from '@kvreuse/inventory';
import { builtInProfile, explainActivation, type NativeCapabilities, profileGroup } from '@kvreuse/profile-admission';
import { routerGroup } from '../src/index.js';
import { transportGroup } from '@kvreuse/native-bindings';
import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  type MemKind,
  parseRankPart,
  referenceGeometries,
  type Role,
  serializeRankPart,
  type Worker,
} from '@kvreuse/descriptors';
import { type WorkerReadiness } from '@kvreuse/discovery';
import { type RouteContext, SourceBook, type TransferCalibration } from '@kvreuse/router';

const groups = [routerGroup, transportGroup, inventoryGroup, profileGroup] as const;
/** The groups a router and its activation read, composed as a router process composes them. */
const routerSettings = defineSettings(groups);
export type RouterTestSettings = SettingsOf<typeof groups>;

export const profile = builtInProfile('llama-3.1-8b-bf16-b64', { settings: routerSettings });
export const llama: Geometry = referenceGeometries['llama-3.1-8b'];
/** A library that can register vram, which this machine's cannot: isolates activation from the hardware. */
export const vramCapable: NativeCapabilities = { backends: ['loopback', 'ucx'], vram: { supported: true } };

export interface WorkerShape {
  readonly role?: Role;
  readonly incarnation?: string;
  readonly geometry?: Geometry;
  readonly tpSize?: number;
  readonly memKind?: MemKind;
  /** The host every rank part names (a version 3 part), or one per TP rank. */
  readonly host?: string | readonly string[];
}

/** The complete descriptor of a worker: one rank part per TP rank, through the wire form and back. */
export function workerOf(workerId: string, shape: WorkerShape = {}): Worker {
  const {
    role = 'decode',
    incarnation = `${workerId}-a`,
    geometry = llama,
    tpSize = 1,
    memKind = 'dram',
    host,
  } = shape;
  const parts = Array.from({ length: tpSize }, (_, tpRank) => {
    const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1, dpRank: 0 };
    const banks = layoutRankBanks(geometry, parallel, { address: BigInt(tpRank + 1) << 36n, blocks: 4, memKind });
    const transport = {
      agentName: `${workerId}-${tpRank}`,
      generation: 1,
      metadata: Buffer.from(workerId).toString('base64'),
    };
    const named = typeof host === 'string' ? host : host?.[tpRank];
    const identity = named === undefined ? { version: 1 as const } : { version: 3 as const, host: named };
    return parseRankPart(
      serializeRankPart({ ...identity, workerId, incarnation, role, geometry, parallel, banks, transport }),
    );
  });
  const assembled = assembleWorker(parts);
  if (!assembled.complete) throw new Error(`test worker ${workerId} is incomplete`);
  return assembled.worker;
}

export function readyOf(worker: Worker, epoch: number): WorkerReadiness {
  return { ready: true, workerId: worker.workerId, incarnation: worker.incarnation, epoch, worker };
}

/** Settings as a process started with these flags has them: the profile's seed, reuse on, then `argv` (a flag given again replaces the earlier one). */
export function settingsOf(argv: readonly string[] = []): RouterTestSettings {
  const flags = new Map<string, string>();
  for (const flag of [
    `--inventory-hash-seed=${profile.blockHash.seed}`,
    '--router-enable-decode-to-prefill-reuse',
    ...argv,
  ])
    flags.set(flag.split('=')[0]!, flag);
  return routerSettings.resolve({ argv: [...flags.values()] }).settings;
}

/** A monotonic clock that moves only when told to, or by `stepMs` on every reading. */
export class ManualClock {
  time = 0;
  stepMs = 0;
  readonly now = (): number => {
    const time = this.time;
    this.time += this.stepMs;
    return time;
  };
}

export const wallStart = 1_800_000_000_000;
/** Token ids of a prompt of `blocks` 64-token blocks: prompt `seed` differs from every other seed. */
export function promptTokens(blocks: number, seed = 1): number[] {
  return Array.from({ length: blocks * llama.blockTokens }, (_, i) => (seed * 100_003 + i) % 150_000);
}

export interface Retained {
  readonly blocks: number;
  readonly tier?: RetentionTier | 'both' | 'split';
}

/**
 * One routing scenario: a prefill destination, decode sources in a real inventory and source book, and
 * the prompt's chain hashed as workers hash it.
 */
export class Scenario {
  wallMs = wallStart;
  readonly inventory = new RetainedInventory({ now: () => this.wallMs });
  readonly sources = new SourceBook();
  readonly clock = new ManualClock();
  readonly destination = workerOf('prefill-0', { role: 'prefill' });
  readonly tokens: number[];
  readonly chain: BigUint64Array;
  private readonly seqs = new Map<string, number>();

  constructor(
    promptBlocks = 16,
    public settings: RouterTestSettings = settingsOf(),
  ) {
    this.tokens = promptTokens(promptBlocks);
    this.chain = hashBlockChain(this.tokens, { salt: saltFor(this.destination), blockTokens: llama.blockTokens });
  }

  /** A decode worker, ready at `epoch` with its inventory complete, retaining the prompt's first blocks. */
  addSource(worker: Worker, epoch: number, retained: Retained, options: { complete?: boolean } = {}): Worker {
    this.sources.observe(readyOf(worker, epoch));
    if (options.complete !== false) this.sources.inventoryComplete(worker.workerId, epoch);
    this.retain(worker, epoch, retained);
    return worker;
  }

  /** Publishes what a worker incarnation retains of the prompt into the inventory. */
  retain(worker: Worker, epoch: number, { blocks, tier = 'host' }: Retained): void {
    const seq = (this.seqs.get(worker.workerId) ?? 0) + 1;
    this.seqs.set(worker.workerId, seq);
    const expiresAt = this.wallMs + 60_000;
    const prefix = this.chain.slice(0, blocks);
    const half = Math.floor(blocks / 2);
    const events =
      tier === 'both'
        ? [
            { type: 'stored' as const, tier: 'gpu' as const, blocks: prefix, expiresAt },
            { type: 'stored' as const, tier: 'host' as const, blocks: prefix, expiresAt },
          ]
        : tier === 'split'
          ? [
              { type: 'stored' as const, tier: 'host' as const, blocks: prefix.slice(0, half), expiresAt },
              { type: 'stored' as const, tier: 'gpu' as const, blocks: prefix.slice(half), expiresAt },
            ]
          : [{ type: 'stored' as const, tier, blocks: prefix, expiresAt }];
    this.inventory.apply({ workerId: worker.workerId, incarnation: worker.incarnation, epoch, seq, events });
  }

  /** Which reuse runs for these settings and workers, as profile admission explains it. */
  activation(workers: readonly Worker[] = this.sources.ready().map((source) => source.worker)) {
    return explainActivation({
      settings: this.settings,
      composition: routerSettings,
      profile,
      capabilities: vramCapable,
      workers: [...workers, this.destination],
    });
  }

  context(extra: { calibration?: TransferCalibration; activation?: RouteContext['activation'] } = {}): RouteContext {
    return {
      settings: this.settings,
      inventory: this.inventory,
      sources: this.sources,
      activation: extra.activation ?? this.activation(),
      clock: this.clock.now,
      ...(extra.calibration === undefined ? {} : { calibration: extra.calibration }),
    };
  }
}

function saltFor(worker: Worker): bigint {
  return blockHashScheme(worker.geometry, profile.blockHash.seed).salt;
}
