// Workers of ReuseEndpoints on real loopback agents in this process, over one memory discovery store:
// each rank its own agent with allocated banks of deterministic bytes; a serving worker's ranks each
// hold the same blocks in a BlockPool whose slots are the banks' block indices.
import { type Geometry, layoutRankBanks, type Role } from '@kvreuse/descriptors';
import type { Clock } from '@kvreuse/drain';
import { type Agent, type Allocation, type Backend, loadTransport } from '@kvreuse/native-bindings';
import type { PullHint, TransferCalibration } from '@kvreuse/router';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ClusterSecret,
  type DiscoveryStore,
  MemoryDiscoveryStore,
  openClusterSecret,
  openSqliteDiscovery,
  type ReadinessGate,
} from '@kvreuse/discovery';
import { Bank, kvreuseOwner, type WorkerIdentity } from '@kvreuse/registry';
import { BlockPool } from '../../src/block-pool.js';
import type { EndpointTransition } from '../../src/lifecycle.js';
import type { EndpointMetrics } from '../../src/metrics.js';
import { ReuseEndpoint } from '../../src/reuse-endpoint.js';
import { fillDeterministic } from '../workers.js';
import { ManualClock } from './manual-clock.js';
import { defaultSettings } from './settings.js';

/** KVREUSE_TRANSPORT_LIBRARY points the tests and benchmarks (as `kvreuse bench --transport-library` does) at another build of the library. */
const libraryPath = process.env['KVREUSE_TRANSPORT_LIBRARY'];
export const transport = loadTransport(libraryPath === undefined ? {} : { libraryPath });

export const testGeometry: Geometry = {
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 4,
  numKvHeads: 2,
  headDim: 8,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'NHD',
};
export const BLOCKS = 8;
/** The first `count` hashes of the chain a serving worker holds: block `i` in slot (bank block) `i`. */
export const chainOf = (count: number): bigint[] => Array.from({ length: count }, (_, i) => 0x1000n + BigInt(i));
export const chain = chainOf(BLOCKS);

export interface EndpointRank {
  readonly endpoint: ReuseEndpoint;
  readonly agent: Agent;
  readonly allocations: Allocation[];
  readonly pool: BlockPool;
  readonly transitions: EndpointTransition[];
}

export interface TestWorker {
  readonly identity: WorkerIdentity;
  readonly ranks: EndpointRank[];
  readonly clock: ManualClock;
}

let sequence = 0;

export interface WorkerSpec {
  readonly workerId: string;
  readonly role: Role;
  readonly tpSize: number;
  readonly geometry?: Geometry;
  /** Serve pins on the chain (every rank holds it). */
  readonly serve?: boolean;
  /** With `serve`: rank 0 publishes the retained inventory (`serve.inventory`); true by default. */
  readonly inventory?: boolean;
  readonly admissionGate?: ReadinessGate;
  readonly settings?: typeof defaultSettings;
  readonly metrics?: EndpointMetrics;
  readonly calibration?: TransferCalibration;
  /** `loopback` by default. */
  readonly backend?: Backend;
  /** The process's own by default; workers in different processes need one they share. */
  readonly secret?: ClusterSecret;
  /** Blocks per bank, BLOCKS by default. */
  readonly blocks?: number;
  /** The GPU whose memory holds the banks (vram: left as allocated, no bank bytes); host memory when absent. */
  readonly gpu?: number;
  /** The endpoints' clock; the worker's `clock`, a manual one, when absent. */
  readonly clock?: Clock;
  /** The ranks this process opens, every one by default: a worker's ranks in processes of their own each open theirs, under one `incarnation`. */
  readonly tpRanks?: readonly number[];
  /** The incarnation, a new one by default. */
  readonly incarnation?: string;
}

/** Creates the worker's ranks (agents, banks, endpoints); `cleanups` gets their closing. */
export async function openWorker(
  store: DiscoveryStore,
  spec: WorkerSpec,
  cleanups: (() => Promise<unknown>)[],
): Promise<TestWorker> {
  sequence += 1;
  const geometry = spec.geometry ?? testGeometry;
  const identity: WorkerIdentity = {
    workerId: spec.workerId,
    incarnation: spec.incarnation ?? `${spec.workerId}-inc-${sequence}`,
    role: spec.role,
    geometry,
    tpSize: spec.tpSize,
    ppSize: 1,
    dpRank: 0,
  };
  const clock = new ManualClock();
  const ranks: EndpointRank[] = [];
  for (const tpRank of spec.tpRanks ?? Array.from({ length: spec.tpSize }, (_, rank) => rank)) {
    const agent = await transport.createAgent({
      name: `${spec.workerId}-tp${tpRank}-${process.pid}-${sequence}`,
      backend: spec.backend ?? 'loopback',
    });
    const memory = spec.gpu === undefined ? {} : { memKind: 'vram' as const, deviceId: spec.gpu };
    const layout = layoutRankBanks(
      geometry,
      { tpRank, tpSize: spec.tpSize, ppRank: 0, ppSize: 1 },
      { address: 0n, blocks: spec.blocks ?? BLOCKS, ...memory },
    );
    const allocations: Allocation[] = [];
    const banks = await Promise.all(
      layout.map(async (bank, index) => {
        if (spec.gpu !== undefined) {
          const allocation = agent.allocateVram(spec.gpu, bank.bytes);
          allocations[index] = allocation;
          return Bank.adopt(
            { ...bank, tpRank, ppRank: 0, index, address: allocation.address },
            kvreuseOwner(allocation),
          );
        }
        const allocation = await agent.allocate(bank.bytes);
        fillDeterministic(allocation.view(), tpRank + (spec.serve === true ? 0 : 7), index);
        allocations[index] = allocation;
        return Bank.adopt({ ...bank, tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
      }),
    );
    const pool = new BlockPool(spec.blocks ?? BLOCKS);
    for (const hash of chainOf(spec.blocks ?? BLOCKS)) pool.commit(pool.allocate(), hash);
    const endpoint = new ReuseEndpoint({
      agent,
      discovery: store,
      secret: spec.secret ?? ClusterSecret.ofThisProcess(),
      worker: identity,
      rank: { tpRank, ppRank: 0 },
      banks,
      settings: spec.settings ?? defaultSettings,
      bankBytes: spec.gpu === undefined ? allocations.map((allocation) => allocation.view()) : [],
      clock: spec.clock ?? clock,
      host: 'test-host',
      ...(spec.serve === true
        ? {
            serve: {
              adapter: pool,
              ...(tpRank === 0 && spec.inventory !== false
                ? { inventory: { tier: 'host' as const, retained: () => pool.retained(), ttlMs: 3_600_000 } }
                : {}),
            },
          }
        : {}),
      ...(spec.admissionGate === undefined ? {} : { admissionGate: spec.admissionGate }),
      ...(spec.metrics === undefined ? {} : { metrics: spec.metrics }),
      ...(spec.calibration === undefined ? {} : { calibration: spec.calibration }),
    });
    const transitions: EndpointTransition[] = [];
    endpoint.onTransition((transition) => transitions.push(transition));
    cleanups.push(() => endpoint.close());
    ranks.push({ endpoint, agent, allocations, pool, transitions });
  }
  return { identity, ranks, clock };
}

/** Resolves once every rank of `worker` is ready. */
export function allReady(worker: TestWorker): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (worker.ranks.every(({ endpoint }) => endpoint.state === 'ready')) resolve();
    };
    for (const { endpoint } of worker.ranks) endpoint.onTransition(check);
    check();
  });
}

/**
 * A serving decode worker of TP 2 and a prefill worker of TP 1 over a new memory store, both ready;
 * `reader` (its metrics, its settings, its calibration) goes to the prefill rank, the reader.
 */
export async function servingPair(
  cleanups: (() => Promise<unknown>)[],
  reader: Pick<WorkerSpec, 'metrics' | 'settings' | 'calibration' | 'secret'> = {},
) {
  const store = new MemoryDiscoveryStore();
  cleanups.push(() => store.close());
  const decode = await openWorker(store, { workerId: 'decode-0', role: 'decode', tpSize: 2, serve: true }, cleanups);
  const prefill = await openWorker(store, { workerId: 'prefill-0', role: 'prefill', tpSize: 1, ...reader }, cleanups);
  await start(decode);
  await start(prefill);
  await allReady(decode);
  await allReady(prefill);
  const pinsHeld = () => decode.ranks.map(({ endpoint }) => endpoint.pinServer?.heldPins);
  return { store, decode, prefill, reader: prefill.ranks[0] as EndpointRank, pinsHeld };
}

/** Registers and publishes every rank. */
export async function start(worker: TestWorker): Promise<void> {
  for (const { endpoint } of worker.ranks) await endpoint.register();
  for (const { endpoint } of worker.ranks) await endpoint.publish();
}

/** A source as a hint names it: a worker incarnation and its epoch. */
export interface HintSource {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
}

/** The router's hint for the first `count` blocks of the chain from `source` (a test worker here, or one named). */
export function hintFor(source: TestWorker | HintSource, count: number, change: Partial<PullHint> = {}): PullHint {
  const named =
    'ranks' in source
      ? {
          workerId: source.identity.workerId,
          incarnation: source.identity.incarnation,
          epoch: source.ranks[0]?.endpoint.epoch,
        }
      : source;
  if (named.epoch === undefined) throw new Error(`${named.workerId} is not published`);
  return {
    workerId: named.workerId,
    incarnation: named.incarnation,
    epoch: named.epoch,
    blocks: { start: 0, count },
    hashes: BigUint64Array.from(chainOf(count)),
    blockTokens: testGeometry.blockTokens,
    tier: 'host',
    linkClass: 'same-host',
    ...change,
  };
}

/** A SQLite discovery file in a new temporary folder, open; `cleanups` gets its closing and the folder's removal. */
export function sqliteDiscovery(cleanups: (() => unknown)[]) {
  const directory = mkdtempSync(join(tmpdir(), 'kvreuse-endpoint-ucx-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, 'discovery.sqlite');
  const store = openSqliteDiscovery(path);
  cleanups.push(() => store.close());
  return { path, store };
}

/**
 * The prefill worker of the process tests: TP 1 on ucx over the SQLite discovery file at `path` (with the
 * cluster secret beside it), published and ready; `cleanups` gets the closing of its ranks.
 */
export async function ucxPrefill(
  store: DiscoveryStore,
  path: string,
  cleanups: (() => unknown)[],
): Promise<TestWorker> {
  const own: (() => Promise<unknown>)[] = [];
  cleanups.push(async () => {
    for (const cleanup of own.reverse()) await cleanup();
  });
  const secret = openClusterSecret({ backend: 'sqlite', sqlitePath: path, secretFile: '' });
  const prefill = await openWorker(
    store,
    { workerId: 'prefill-0', role: 'prefill', tpSize: 1, backend: 'ucx', secret },
    own,
  );
  await start(prefill);
  await allReady(prefill);
  return prefill;
}
